#!/usr/bin/env bash
# hone's loop overhead per experiment beside Optuna's per trial, in one run: TPE in memory and
# TPE on SQLite (bench/overhead_optuna.py), the same three knobs (`knob_repo` in bench/lib.sh),
# the same no-op verifier `echo score: 1` run as a subprocess through `sh -c`.
#
#   HONE=path/to/hone [HONE_BASE=path/to/other/hone] bench/overhead_optuna.sh [N ...]
#
# N defaults to "200 1000 10000". Each N runs REPEATS times (default 3; N from LARGE_FROM,
# default 1000, LARGE_REPEATS times, default 1), the arms alternated within each repeat: hone
# (HONE), hone (HONE_BASE, when set, for N up to BASE_MAX_N), Optuna in memory, Optuna on
# SQLite. WINDOW=K (default 0: off): at N from LARGE_FROM, Optuna's arms are given N - K
# finished trials first and only the last K run and are timed (bench/overhead_optuna.py's
# MEASURED; the wall time is then the K trials'); hone's runs are always whole. The virtual
# environment with optuna is $OPTUNA_VENV (default bench/.venv-optuna, ignored by git), made
# with pip when missing.
#
# Per arm and N it prints the median over repeats of:
#   overhead median    hone: each experiment's total - proposer - verifier time, as recorded
#                      (what bench/overhead.sh reports); Optuna: each trial's time - verifier
#                      subprocess - ask/suggest (the sampler)
#   with proposer      hone: total - verifier; Optuna: trial time - verifier subprocess
#   wall overhead      (wall time - verifier time) / N: everything but the verifier, including
#                      the work between experiments and start-up
#   wall time
set -euo pipefail
sizes=${*:-200 1000 10000}
repeats=${REPEATS:-3}
large_from=${LARGE_FROM:-1000}
large_repeats=${LARGE_REPEATS:-1}
window=${WINDOW:-0}
base_max=${BASE_MAX_N:-1000000000}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
venv="${OPTUNA_VENV:-$here/bench/.venv-optuna}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q optuna
fi
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
# One JSON line per arm and run, as each finishes (RESULTS=path keeps them after the run).
results="${RESULTS:-$d/results.jsonl}"
: > "$results"

# hone_arm LABEL BINARY N: one `hone run` of N experiments in a fresh knob repository.
hone_arm() {
  local w="$d/run-$1-$3"
  rm -rf "$w" && mkdir "$w"
  (
    cd "$w"
    knob_repo "echo score: 1" "$3"
    start=$(date +%s.%N)
    "$2" run --tag bench > run.txt
    end=$(date +%s.%N)
    "$2" log --json > log.jsonl
    python3 - "$1" "$3" "$start" "$end" <<'PY'
import json, statistics, sys
label, n, start, end = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
rows = [json.loads(l) for l in open("log.jsonl")]
assert len(rows) == n, f"{label}: {len(rows)} experiments recorded, {n} asked"
over = sorted(r["total_ms"] - r["propose_ms"] - r["verify_ms"] for r in rows)
ver = sum(r["verify_ms"] for r in rows)
wall = (end - start) * 1000
print(json.dumps({"arm": label, "n": n, "median_ms": statistics.median(over),
    "p90_ms": over[int(len(over) * 0.9)],
    "with_proposer_ms": statistics.median(r["total_ms"] - r["verify_ms"] for r in rows),
    "wall_clock_overhead_mean_ms": (wall - ver) / n, "wall_s": wall / 1000}))
PY
  ) >> "$results"
  rm -rf "$w"
}

# optuna_arm STORAGE N
optuna_arm() {
  local w="$d/optuna-$1-$2"
  rm -rf "$w" && mkdir "$w"
  local k=$2
  if [ "$window" -gt 0 ] && [ "$2" -ge "$large_from" ] && [ "$2" -gt "$window" ]; then
    k=$window
  fi
  "$venv/bin/python" "$here/bench/overhead_optuna.py" "$1" "$2" "$w" "$k" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
k, n = r["measured"], r["n"]
arm = "optuna-" + sys.argv[1] + ("" if k == n else f" (last {k})")
print(json.dumps({"arm": arm, "n": r["n"],
    "median_ms": r["median_excl_sampler_ms"], "p90_ms": r["p90_excl_sampler_ms"],
    "with_proposer_ms": r["median_ms"],
    "wall_clock_overhead_mean_ms": r["wall_clock_overhead_mean_ms"], "wall_s": r["wall_s"]}))
' "$1" >> "$results"
  rm -rf "$w"
}

echo "start $(date -u +%H:%M:%S) UTC, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in $sizes; do
  r=$repeats
  if [ "$n" -ge "$large_from" ]; then r=$large_repeats; fi
  for i in $(seq "$r"); do
    hone_arm hone "$hone" "$n"
    if [ -n "${HONE_BASE:-}" ] && [ "$n" -le "$base_max" ]; then
      hone_arm hone-base "$HONE_BASE" "$n"
    fi
    optuna_arm memory "$n"
    optuna_arm sqlite "$n"
    echo "N=$n repeat $i done $(date -u +%H:%M:%S) UTC, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
keys = sorted({(r["n"], r["arm"]) for r in rows}, key=lambda k: (k[0], k[1]))
print("| N | arm | runs | overhead median | p90 | with proposer | wall overhead | wall time |")
print("|---|---|---|---|---|---|---|---|")
for n, arm in keys:
    rs = [r for r in rows if r["n"] == n and r["arm"] == arm]
    m = lambda k: statistics.median(r[k] for r in rs)
    print(f"| {n} | {arm} | {len(rs)} | {m('median_ms'):.1f} ms | {m('p90_ms'):.1f} ms | "
          f"{m('with_proposer_ms'):.1f} ms | {m('wall_clock_overhead_mean_ms'):.1f} ms | {m('wall_s'):.1f} s |")
PY
echo "end $(date -u +%H:%M:%S) UTC, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
