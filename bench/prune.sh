#!/usr/bin/env bash
# Pruning hopeless runs (issue 17): hone's knobs optimizer on a synthetic learning-curve
# problem (bench/prune: a training loop printing `step=K loss=V` each step, 50 steps of
# STEP_SECONDS), without pruning and with each `[verify] prune` rule of PRUNE_RULES, then Optuna's TPE with
# and without its MedianPruner on the same curves (bench/prune_optuna.py, in the venv that
# bench/optuna.sh makes).
#
#   bench/prune.sh [SEEDS] [EXPERIMENTS] [STEP_SECONDS]   (default 3 30 0.03; about 10 minutes
#   of verifier time, more on a loaded machine)
#   PRUNE_WARMUPS="10 20" (the warm-ups tried, in steps, for hone and Optuna alike)
#   PRUNE_RULES="median top:3" (hone's rules tried, each with each warm-up; "halving", "reach" too)
#   PRUNE_MIN_RUNS=N (hone's prune_min_runs for every pruned arm; default the spec's, 3)
#   PRUNE_SEED0=S (the first seed; default 1: seeds S..S+SEEDS-1, for an independent sample)
#   PRUNE_PER_SEED=1 (also print, on stderr, a line per hone arm and seed: arm, seed,
#   experiments, pruned, steps, final regret; the lines of `examples/prune_sim.rs` with
#   PER_SEED, which draws the same curves: `CAP=PRUNE_CAP SLIP=0`)
#   PRUNE_CAP=C (a pruned arm runs at most C times EXPERIMENTS; default 2. The verifier time
#   is the measure: a large C, 4 here, lets the steps alone end every arm, at the cost of
#   running experiments past the budget that the figures then leave out)
#
# Equal verifier time: the unpruned arm runs EXPERIMENTS experiments per seed; a pruned arm
# may run PRUNE_CAP times as many and is cut, per seed, where its steps run reach the unpruned arm's
# (its best so far counted there). Figures per arm, over all seeds: experiments that ran the
# verifier (baseline excluded), how many were pruned, hone's measured verify_ms summed,
# steps run, experiments per hour of verifier time (measured, and counted as steps x
# STEP_SECONDS, the unit Optuna's arms use too), and the median over seeds of the final
# regret (best val_loss minus the optimum 1.0), and the time to regret: the verifier time
# (steps x STEP_SECONDS) after which the median seed's best so far reached the unpruned arm's
# median final regret (how many seeds reached it at all). HONE=path/to/hone picks the binary (default:
# a release build).
set -euo pipefail
seeds=${1:-3}
m=${2:-30}
step_s=${3:-0.03}
warmups=${PRUNE_WARMUPS:-10 20}
rules=${PRUNE_RULES:-median top:3}
cap=${PRUNE_CAP:-2}
seed0=${PRUNE_SEED0:-1}
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${HONE:-}" ]; then
  cargo build --release --quiet --manifest-path "$here/Cargo.toml" -p hone-cli
  HONE="${CARGO_TARGET_DIR:-$here/target}/release/hone"
fi
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
arm() { # name, experiments, extra [verify] lines
  local name=$1 n=$2 extra=$3 s
  for s in $(seq "$seed0" $((seed0 + seeds - 1))); do
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
env       = { STEP_SECONDS = "$step_s", CURVE_SEED = "$s" }
progress  = "loss"
$extra

[agent]
kind = "knobs"

[stop]
max_experiments = $((n + 1))
TOML
    (cd "$r" && git init -q -b main && git add -A &&
      git -c user.name=b -c user.email=b@b commit -qm init &&
      "$HONE" run --tag bench --seed "$s" > run.txt 2>&1)
  done
  echo "$name" >> "$d/arms.txt"
}
arm "no pruning" "$m" ""
for rule in $rules; do
  for w in $warmups; do
    arm "$rule, warm-up $w steps" $((cap * m)) "prune = \"$rule\"
prune_warmup = \"$w steps\"${PRUNE_MIN_RUNS:+
prune_min_runs = $PRUNE_MIN_RUNS}"
  done
done
python3 - "$d" "$seeds" "$step_s" "$seed0" "${PRUNE_PER_SEED:-}" > "$d/arms.jsonl" <<'PY'
import json, sqlite3, statistics, sys
d, seeds, step_s, seed0 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
per_seed = bool(sys.argv[5])
ran = ("keep", "discard", "pruned", "crash", "timeout")
def seed_run(name, s):
    db = sqlite3.connect(f"{d}/{name}-{s}/.hone/hone.db")
    steps = dict(db.execute("SELECT experiment, COUNT(*) FROM curves GROUP BY experiment"))
    rows = db.execute("SELECT n, status, objective, verify_ms FROM experiments ORDER BY n").fetchall()
    return rows, steps
arms = [l.strip() for l in open(f"{d}/arms.txt")]
budget = {}
target = None
def median_or_inf(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
for name in arms:
    exps = pruned = steps_run = verify_ms = 0
    regrets, reach = [], []
    for s in range(seed0, seed0 + seeds):
        rows, steps = seed_run(name, s)
        best, used, n_exps, reached = None, 0, 0, float("inf")
        pruned_before = pruned
        for n, status, objective, ms in rows:
            if n > 0 and status in ran:
                cost = steps.get(n, 0)
                if name != arms[0] and used + cost > budget[s]:
                    break
                used += cost
                n_exps += 1
                pruned += status == "pruned"
                verify_ms += ms
            if status in ("baseline", "keep"):
                best = objective if best is None else min(best, objective)
            if target is not None and best - 1.0 <= target:
                reached = min(reached, used)
        if name == arms[0]:
            budget[s] = used
        if per_seed:
            print(f"{name}\t{s}\t{n_exps}\t{pruned - pruned_before}\t{used}\t{best - 1.0:.6f}",
                  file=sys.stderr)
        exps += n_exps
        steps_run += used
        regrets.append(best - 1.0)
        reach.append(reached)
    if target is None:
        # The unpruned arm: its own time to its median regret, read again now it is known.
        target = statistics.median(regrets)
        reach = []
        for s in range(seed0, seed0 + seeds):
            rows, steps = seed_run(name, s)
            best, used, reached = None, 0, float("inf")
            for n, status, objective, ms in rows:
                if n > 0 and status in ran:
                    used += steps.get(n, 0)
                if status in ("baseline", "keep"):
                    best = objective if best is None else min(best, objective)
                if best - 1.0 <= target:
                    reached = min(reached, used)
                    break
            reach.append(reached)
    print(json.dumps({
        "arm": f"hone knobs, {name}", "seeds": seeds, "experiments": exps, "pruned": pruned,
        "verify_s": verify_ms / 1000, "per_hour": exps / (verify_ms / 3.6e6),
        "steps": steps_run, "per_step_hour": exps / (steps_run * step_s / 3600),
        "median_regret": statistics.median(regrets),
        "to_regret_s": median_or_inf(reach) * step_s,
        "reached": sum(r != float("inf") for r in reach),
    }))
PY
OPTUNA_VENV=${OPTUNA_VENV:-$here/bench/.venv-optuna}
if [ ! -x "$OPTUNA_VENV/bin/python" ]; then
  python3 -m venv "$OPTUNA_VENV" && "$OPTUNA_VENV/bin/pip" install -q optuna
fi
for w in $warmups; do
  "$OPTUNA_VENV/bin/python" "$here/bench/prune_optuna.py" --seeds "$seeds" --seed0 "$seed0" --trials "$m" \
    --step-seconds "$step_s" --warmup "$w" --cap "$cap" | sed "s/MedianPruner/MedianPruner, warm-up $w steps/"
done | awk '!(/no pruner/ && seen++)' >> "$d/arms.jsonl"
python3 - "$d/arms.jsonl" <<'PY'
import json, sys
arms = [json.loads(l) for l in open(sys.argv[1])]
print("| arm | experiments run | pruned | verifier time (measured) | per verifier-hour (measured) | steps run | per hour of steps | vs no pruning | median final regret | time to the unpruned median regret (seeds reaching it) |")
print("|---|---|---|---|---|---|---|---|---|---|")
base = {}
for a in arms:
    tool = a["arm"].split(" ")[0]
    base.setdefault(tool, a["per_step_hour"])
    measured = f'{a["verify_s"]:.1f} s' if "verify_s" in a else "-"
    per_hour = f'{a["per_hour"]:.0f}' if "per_hour" in a else "-"
    reach = "-"
    if "to_regret_s" in a:
        t = a["to_regret_s"]
        reach = ("not reached" if t == float("inf") else f"{t:.1f} s") + f' ({a["reached"]}/{a["seeds"]})'
    print(f'| {a["arm"]} | {a["experiments"]} | {a["pruned"]} | {measured} | {per_hour} | {a["steps"]} | {a["per_step_hour"]:.0f} | {a["per_step_hour"] / base[tool]:.2f}x | {a["median_regret"]:.4f} | {reach} |')
PY
