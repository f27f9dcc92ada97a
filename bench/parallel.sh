#!/usr/bin/env bash
# Throughput of parallel experiments on one machine: a verifier that sleeps a fixed time and
# the knobs proposer, with 1, 2, 4 and 8 workers (`hone run --workers N`).
#
#   bench/parallel.sh [CANDIDATES] [SLEEP_SECONDS] [WORKERS...]   (default 32 1 1 2 4 8)
#
# REVIEW_SECONDS=S adds a reviewer command that takes S seconds and approves: each candidate is
# then reviewed and verified, and the reviews of candidates in flight run at once (each on its
# slot's thread), so the target stays the same.
#
# The baseline always runs alone, so the figure is the candidates' span: from the first
# candidate's start to the last one's end, as hone recorded them. Speed-up is candidates per
# second against 1 worker; the target is at least 0.9 x N (sleeping verifiers need no CPU, so
# a 2-core machine can show it).
set -euo pipefail
m=${1:-32}
sleep_s=${2:-1}
shift $(( $# > 2 ? 2 : $# ))
workers=("$@")
[ ${#workers[@]} -gt 0 ] || workers=(1 2 4 8)
# HONE=path/to/hone measures that binary instead.
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
printf '| workers | candidates | span | candidates/s | speed-up | target (0.9 x N) | keeps |\n'
printf '|---|---|---|---|---|---|---|\n'
base=""
for w in "${workers[@]}"; do
  r="$d/w$w"
  mkdir -p "$r"
  cd "$r"
  review=""
  if [ -n "${REVIEW_SECONDS:-}" ]; then
    review=$(printf '[review]\ncommand = "sleep %s; echo APPROVE"' "$REVIEW_SECONDS")
  fi
  knob_repo "sleep $sleep_s; sed -n 's/^A = \\\\([0-9]*\\\\).*/score: \\\\1/p' params.py" \
    $((m + 1)) 'timeout = "5m"' "$review"
  "$hone" run --tag bench --workers "$w" > run.txt
  "$hone" log --json > log.jsonl
  line=$(span_row "$w" "$base" keeps)
  rate=${line%%||*}
  [ -n "$base" ] || base=$rate
  printf '|%s\n' "${line#*||}"
  cd "$here"
done
