#!/usr/bin/env bash
# Pruning hopeless runs (issue 17): hone's knobs optimizer on a synthetic learning-curve
# problem (bench/prune: a training loop printing `step=K loss=V` each step, 50 steps of
# STEP_SECONDS), without pruning and with `[verify] prune = "median"`, then Optuna's TPE with
# and without its MedianPruner on the same curves (bench/prune_optuna.py, in the venv that
# bench/optuna.sh makes).
#
#   bench/prune.sh [SEEDS] [EXPERIMENTS] [STEP_SECONDS]   (default 3 40 0.01)
#
# Figures per arm, over all seeds: experiments decided (baseline excluded), how many were
# pruned, verifier time (hone's verify_ms summed, and steps run x STEP_SECONDS), experiments
# per hour of verifier time, and the median over seeds of the final regret (best val_loss
# minus the optimum 1.0). HONE=path/to/hone picks the binary (default: a release build).
set -euo pipefail
seeds=${1:-3}
m=${2:-40}
step_s=${3:-0.01}
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${HONE:-}" ]; then
  cargo build --release --quiet --manifest-path "$here/Cargo.toml" -p hone-cli
  HONE="${CARGO_TARGET_DIR:-$here/target}/release/hone"
fi
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
arm() { # name, extra [verify] lines
  local name=$1 extra=$2 s
  for s in $(seq 1 "$seeds"); do
    local r="$d/$name-$s"
    mkdir -p "$r"
    cp "$here"/bench/prune/{knobs.py,curve.py,train.py} "$r/"
    cat > "$r/hone.toml" <<TOML
[loop]
editable  = ["knobs.py"]
protected = ["train.py", "curve.py", "hone.toml"]

[verify]
command   = "python3 -S -B train.py"
timeout   = "60s"
metric    = "val_loss"
env       = { STEP_SECONDS = "$step_s" }
progress  = "loss"
$extra

[agent]
kind = "knobs"

[stop]
max_experiments = $((m + 1))
TOML
    (cd "$r" && git init -q -b main && git add -A &&
      git -c user.name=b -c user.email=b@b commit -qm init &&
      "$HONE" run --tag bench --seed "$s" > run.txt 2>&1)
  done
  python3 - "$d" "$name" "$seeds" "$step_s" <<'PY'
import json, sqlite3, statistics, sys
d, name, seeds, step_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
exps = pruned = steps = 0
verify_ms = 0
regrets = []
for s in range(1, seeds + 1):
    db = sqlite3.connect(f"{d}/{name}-{s}/.hone/hone.db")
    rows = db.execute("SELECT n, status, objective, verify_ms FROM experiments WHERE n > 0").fetchall()
    exps += len(rows)
    pruned += sum(r[1] == "pruned" for r in rows)
    verify_ms += sum(r[3] for r in rows)
    steps += db.execute("SELECT COUNT(*) FROM curves WHERE experiment > 0").fetchone()[0]
    best = db.execute("SELECT MIN(objective) FROM experiments WHERE status IN ('baseline', 'keep')").fetchone()[0]
    regrets.append(best - 1.0)
print(json.dumps({
    "arm": f"hone knobs, {name}", "seeds": seeds, "experiments": exps, "pruned": pruned,
    "verify_s": verify_ms / 1000, "per_hour": exps / (verify_ms / 3.6e6),
    "steps": steps, "per_step_hour": exps / (steps * step_s / 3600),
    "median_regret": statistics.median(regrets),
}))
PY
}
{
  arm "no pruning" ""
  arm "prune median" 'prune = "median"
prune_warmup = "10 steps"'
  OPTUNA_VENV=${OPTUNA_VENV:-$here/bench/.venv-optuna}
  if [ ! -x "$OPTUNA_VENV/bin/python" ]; then
    python3 -m venv "$OPTUNA_VENV" && "$OPTUNA_VENV/bin/pip" install -q optuna
  fi
  "$OPTUNA_VENV/bin/python" "$here/bench/prune_optuna.py" --seeds "$seeds" --trials "$m" --step-seconds "$step_s"
} > "$d/arms.jsonl"
python3 - "$d/arms.jsonl" <<'PY'
import json, sys
arms = [json.loads(l) for l in open(sys.argv[1])]
print("| arm | experiments | pruned | verifier time | experiments per verifier-hour | per hour of steps run | vs no pruning (steps) | median final regret |")
print("|---|---|---|---|---|---|---|---|")
base = {}
for a in arms:
    tool = a["arm"].split(" ")[0]
    base.setdefault(tool, a["per_step_hour"])
    measured = f'{a["verify_s"]:.1f} s' if "verify_s" in a else "-"
    per_hour = f'{a["per_hour"]:.0f}' if "per_hour" in a else "-"
    print(f'| {a["arm"]} | {a["experiments"]} | {a["pruned"]} | {measured} | {per_hour} | {a["per_step_hour"]:.0f} | {a["per_step_hour"] / base[tool]:.2f}x | {a["median_regret"]:.4f} |')
PY
