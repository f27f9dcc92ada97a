#!/usr/bin/env bash
# Feasibility learned from crashes (issue 17) through the real engine: the `crashy` problem of
# bench/problems (part of the box crashes), one `hone run` of BUDGET experiments per seed in a
# fresh git repository, and from `hone log --json` the crashes and the best value. Prints one
# line per seed and the means. `hone bench` reports regret only; this counts the crashes.
#
#   bench/crashy.sh HONE_BINARY [SEEDS] [BUDGET] [WORKERS]   (default 10 50 1)
set -euo pipefail
# A path is made absolute (runs happen in other directories); a bare name is looked up on PATH.
abs() { case $1 in */*) echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" ;; *) command -v "$1" ;; esac; }
hone=$(abs "$1")
seeds=${2:-10}
budget=${3:-50}
workers=${4:-1}
here=$(cd "$(dirname "$0")/.." && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
for s in $(seq 1 "$seeds"); do
  r="$d/s$s"
  cp -r "$here/bench/problems/crashy" "$r"
  git -C "$r" init -q -b main
  git -C "$r" add -A
  git -C "$r" -c user.name=bench -c user.email=bench@localhost commit -qm crashy
  (cd "$r" && "$hone" run --seed "$s" -n "$budget" --workers "$workers" >/dev/null 2>&1) || true
  (cd "$r" && "$hone" log --json) | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
crashes = sum(r["status"] == "crash" for r in rows)
best = min(r["objective"] for r in rows if r["status"] in ("baseline", "keep"))
print("seed %s: %d experiments, %d crashes, best %.6g" % (sys.argv[1], len(rows), crashes, best))
' "$s"
done | tee "$d/out"
python3 - "$d/out" <<'PY'
import re, statistics, sys
rows = [tuple(map(float, re.findall(r"(\d+) crashes, best (\S+)", l)[0])) for l in open(sys.argv[1])]
c = [r[0] for r in rows]; b = [r[1] for r in rows]
print("mean crashes %.2f (median %.1f); best value mean %.4f median %.4f (baseline 0.82, optimum 0)"
      % (statistics.mean(c), statistics.median(c), statistics.mean(b), statistics.median(b)))
PY
