#!/usr/bin/env bash
# Loop overhead per experiment and peak memory, with a no-op verifier and the knobs proposer.
#
#   bench/overhead.sh [EXPERIMENTS]      (default 200; run with 1000 for the memory figure)
#
# Overhead = each experiment's total time minus its proposer and verifier time, as recorded by
# hone (median and p90 over all experiments), plus the wall-clock view: (wall time - proposer -
# verifier) / experiments, which also counts the work between experiments. Peak memory is the
# maximum resident set of `hone run` as GNU time reports it (an upper bound: it is the largest of
# hone and the processes it waited for).
set -euo pipefail
n=${1:-200}
# HONE=path/to/hone measures that binary instead (two builds compared in one session).
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cd "$d"
knob_repo "echo score: 1" "$n"
start=$(date +%s.%N)
/usr/bin/time -f '%M' -o rss.txt "$hone" run --tag bench > run.txt
end=$(date +%s.%N)
"$hone" log --json > log.jsonl
python3 - "$start" "$end" "$n" <<'PY'
import json, sys, statistics
start, end, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
rows = [json.loads(l) for l in open("log.jsonl")]
over = sorted(r["total_ms"] - r["propose_ms"] - r["verify_ms"] for r in rows)
prop = sum(r["propose_ms"] for r in rows)
ver = sum(r["verify_ms"] for r in rows)
wall = (end - start) * 1000
rss_kb = int(open("rss.txt").read().split()[-1])
print(f"experiments:                 {len(rows)}")
print(f"overhead median (recorded):  {statistics.median(over):.1f} ms")
print(f"overhead p90 (recorded):     {over[int(len(over)*0.9)]:.1f} ms")
print(f"overhead mean (wall clock):  {(wall - prop - ver)/len(rows):.1f} ms")
print(f"proposer mean:               {prop/len(rows):.1f} ms")
print(f"verifier mean:               {ver/len(rows):.1f} ms")
print(f"wall time:                   {wall/1000:.1f} s")
print(f"peak RSS:                    {rss_kb/1024:.1f} MiB")
PY
