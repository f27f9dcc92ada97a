#!/usr/bin/env bash
# The coordinator's overhead per experiment with each store: the embedded SQLite file and a
# PostgreSQL server (`[store] url`), with a no-op verifier and the knobs proposer.
#
#   bench/store.sh [EXPERIMENTS]      (default 200)
#
# The PostgreSQL server is a private one started here in a temporary directory on a free
# loopback port (Debian's postgresql package; as root it runs as the postgres user), with its
# default durability settings (fsync and synchronous_commit on), as SQLite runs with
# synchronous = FULL. Overhead is as in bench/overhead.sh: each experiment's total time minus
# its proposer and verifier time (median, p90), and the wall-clock view (wall time - proposer -
# verifier) / experiments. For PostgreSQL it also counts the transactions the run committed
# per experiment (pg_stat_database): each is one round trip or more, the cost to add per
# experiment for a server farther away than loopback.
set -euo pipefail
n=${1:-200}
# HONE=path/to/hone measures that binary instead (two builds compared in one session).
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
d=$(mktemp -d)
cleanup() {
  stop_pg_server
  rm -rf "$d"
}
trap cleanup EXIT
# shellcheck source=bench/pg-server.sh
source "$here/bench/pg-server.sh"
commits() { "$pgbin/psql" -X -A -t -d "$url" -c "SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'"; }

echo "| store | experiments | overhead median | overhead p90 | overhead mean (wall clock) | wall time | transactions per experiment |"
echo "|---|---|---|---|---|---|---|"
for store in sqlite postgres; do
  repo="$d/$store"
  mkdir "$repo" && cd "$repo"
  tail=""
  if [ "$store" = postgres ]; then tail=$(printf '[store]\nurl = "%s"' "$url"); fi
  knob_repo "echo score: 1" "$n" "" "$tail"
  # Statistics are sent to the collector asynchronously: let earlier ones land first.
  sleep 1; before=$(commits)
  start=$(date +%s.%N)
  "$hone" run --tag bench > run.txt
  end=$(date +%s.%N)
  sleep 1; after=$(commits)
  "$hone" log --json > log.jsonl
  txns=$([ "$store" = postgres ] && echo $((after - before)) || echo "")
  python3 - "$store" "$start" "$end" "$txns" <<'PY'
import json, sys, statistics
store, start, end, txns = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rows = [json.loads(l) for l in open("log.jsonl")]
over = sorted(r["total_ms"] - r["propose_ms"] - r["verify_ms"] for r in rows)
prop = sum(r["propose_ms"] for r in rows)
ver = sum(r["verify_ms"] for r in rows)
wall = (end - start) * 1000
per = f"{int(txns) / len(rows):.1f}" if txns else "-"
print(f"| {store} | {len(rows)} | {statistics.median(over):.1f} ms | {over[int(len(over)*0.9)]:.1f} ms "
      f"| {(wall - prop - ver)/len(rows):.1f} ms | {wall/1000:.1f} s | {per} |")
PY
done
