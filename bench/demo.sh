#!/usr/bin/env bash
# `hone demo` figures: baseline and best val_bpb, % improvement, experiments, wall time.
#
#   bench/demo.sh [SEED...]     (default seeds: 0 1 2)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release --quiet --manifest-path "$here/Cargo.toml" -p hone-cli
hone="$here/target/release/hone"
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(0 1 2)
for seed in "${seeds[@]}"; do
  d=$(mktemp -d)
  start=$(date +%s.%N)
  "$hone" demo --dir "$d/demo" --seed "$seed" > "$d/out.txt"
  end=$(date +%s.%N)
  "$hone" -C "$d/demo" status --json > "$d/status.json"
  python3 - "$start" "$end" "$seed" "$d/status.json" <<'PY'
import json, sys
start, end, seed = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
s = json.load(open(sys.argv[4]))
imp = (s["baseline"] - s["best"]) / s["baseline"] * 100
print(f"seed {seed}: baseline {s['baseline']:.6f}  best {s['best']:.6f} (#{s['best_experiment']})  "
      f"improvement {imp:.2f}%  experiments {s['experiments']}  keeps {s['counts'].get('keep', 0)}  "
      f"wall {end - start:.1f}s")
PY
  rm -rf "$d"
done
