#!/usr/bin/env bash
# Parallel knobs runs, two builds side by side: how often a candidate that beat a moved best
# was discarded as a merge conflict, merged and verified again, or kept as its own code, and
# the best value each run reached. For the thirty-fourth stop's fix (knob literals replayed onto
# the best; a merge that is the candidate's own code kept at once) and the thirty-fifth's (a
# candidate's own code kept on top of the moved best, undoing a change of the best's it lacks;
# both changes together verified next: counted as "re-verified" and "kept undoing").
#
#   HONE_A=<a build> HONE_B=<another> bench/parallel_merge.sh [seeds] [experiments] [workers] [problem]
#
# Defaults: 8 seeds, 60 experiments, 4 workers, the `llm` problem of bench/problems. Prints one
# line per build and seed, then the totals.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
seeds=${1:-8}
n=${2:-60}
workers=${3:-4}
problem=${4:-llm}
: "${HONE_A:?set HONE_A to a hone binary}"
: "${HONE_B:?set HONE_B to a hone binary}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
printf 'build\tseed\tconflicts\tre-verified\town code\tkept undoing\tbest\n'
for arm in A B; do
  bin=HONE_$arm
  bin=${!bin}
  tot_c=0; tot_r=0; tot_o=0; tot_u=0
  for seed in $(seq 1 "$seeds"); do
    d="$tmp/$arm-$seed"
    cp -r "$here/problems/$problem" "$d"
    cp -r "$here/problems/shared" "$tmp/shared" 2>/dev/null || true
    (cd "$d" && git init -q -b main && git add -A && git -c user.name=b -c user.email=b@b commit -qm p)
    (cd "$d" && "$bin" run --tag p --seed "$seed" -n "$n" --workers "$workers" > run.out 2>&1) || { cat "$d/run.out"; exit 1; }
    line=$(cd "$d" && "$bin" log --json --run p | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
c = sum("conflict:" in r["reason"] for r in rows)
v = sum(("is re-verified as" in r["reason"]) or ("both changes together are verified as" in r["reason"]) for r in rows)
o = sum("is its own code, measured already" in r["reason"] for r in rows)
u = sum("is kept on top of it" in r["reason"] for r in rows)
best = min(r["objective"] for r in rows if r["status"] in ("baseline", "keep"))
print(c, v, o, u, "%.6f" % best)')
    read -r c v o u best <<< "$line"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$arm" "$seed" "$c" "$v" "$o" "$u" "$best"
    tot_c=$((tot_c + c)); tot_r=$((tot_r + v)); tot_o=$((tot_o + o)); tot_u=$((tot_u + u))
  done
  printf '%s\tall\t%s\t%s\t%s\t%s\t-\n' "$arm" "$tot_c" "$tot_r" "$tot_o" "$tot_u"
done
