#!/usr/bin/env bash
# Throughput through PostgreSQL with remote workers: a private PostgreSQL server, N `hone worker`
# processes (here on this machine, each with its own clone of a bare "shared" remote), a
# verifier that sleeps a fixed time, and the knobs proposer; the coordinator keeps
# `--workers N` verifications posted at once.
#
#   bench/workers.sh [CANDIDATES] [SLEEP_SECONDS] [WORKERS...]   (default 16 1 1 2)
#
# As in bench/parallel.sh the figure is the candidates' span (the baseline runs alone) and the
# speed-up is candidates per second against the first worker count given.
set -euo pipefail
m=${1:-16}
sleep_s=${2:-1}
shift $(( $# > 2 ? 2 : $# ))
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(1 2)
# HONE=path/to/hone measures that binary instead.
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
d=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  stop_pg_server
  rm -rf "$d"
}
trap cleanup EXIT
# shellcheck source=bench/pg-server.sh
source "$here/bench/pg-server.sh"

printf '| remote workers | candidates | span | candidates/s | speed-up | target (0.9 x N) |\n'
printf '|---|---|---|---|---|---|\n'
base=""
for w in "${counts[@]}"; do
  r="$d/w$w"
  mkdir -p "$r"
  git init -q --bare "$r/shared.git"
  mkdir "$r/proj" && cd "$r/proj"
  knob_repo "sleep $sleep_s; sed -n 's/^A = \\\\([0-9]*\\\\).*/score: \\\\1/p' params.py" \
    $((m + 1)) 'timeout = "5m"' \
    "$(printf '[exec]\nbackend = "workers"\nremote = "%s"\n\n[store]\nurl = "%s"\nrepo = "bench-w%s"' "$r/shared.git" "$url" "$w")"
  pids=()
  for i in $(seq "$w"); do
    "$hone" worker --store "$url" --repo "$r/shared.git" --dir "$r/worker$i" --slot "s$i" > "$r/worker$i.log" 2>&1 &
    pids+=($!)
  done
  "$hone" run --tag bench --workers "$w" > run.txt
  "$hone" log --json > log.jsonl
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  line=$(span_row "$w" "$base")
  rate=${line%%||*}
  [ -n "$base" ] || base=$rate
  printf '|%s\n' "${line#*||}"
  cd "$here"
done
