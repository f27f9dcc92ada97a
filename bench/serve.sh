#!/usr/bin/env bash
# The dashboard under a long run: builds a store with N experiments (default 10,000) through
# the store API, starts `hone serve` (release build) on it, and reports the time to first byte
# of the run page and of experiment-table pages (median of 20 requests each, curl) and the
# server's peak resident memory (VmHWM) after them.
#
#   bench/serve.sh            # N=10000
#   N=50000 bench/serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-10000}
target=${CARGO_TARGET_DIR:-target}

cargo build -q --release -p hone-cli --bin hone
cargo build -q --release -p hone-serve --example bench-store

# shellcheck source=bench/serve-lib.sh
source "$(dirname "$0")/serve-lib.sh"
serve_scratch
git -C "$dir" init -q -b main
git -C "$dir" -c user.name=bench -c user.email=bench@localhost commit -q --allow-empty -m init

t0=$(date +%s.%N)
"$target/release/examples/bench-store" "$dir" "$N"
t1=$(date +%s.%N)
echo "store: $N experiments written in $(echo "$t1 - $t0" | bc) s"

start_serve "$target/release/hone" "$dir" "$dir/serve.out"

# Median of 20 times to first byte, in milliseconds; also the body's size.
ttfb() {
  local size
  size=$(curl -s -H "Authorization: Bearer $token" -o /dev/null -w '%{size_download}' "$1")
  for _ in $(seq 20); do
    curl -s -H "Authorization: Bearer $token" -o /dev/null -w '%{time_starttransfer}\n' "$1"
  done | sort -n | awk -v size="$size" -v what="$2" \
    '{ a[NR] = $1 } END { printf "%-52s median TTFB %6.1f ms   (%d KiB)\n", what, (a[10] + a[11]) / 2 * 1000, size / 1024 }'
}

ttfb "${url}runs/bench" "run page (counters, plot of $N, table page 1)"
ttfb "${url}runs/bench?sort=objective&page=100" "run page, table sorted by value, page 100"
ttfb "${url}runs/bench?status=discard&sort=duration&dir=desc&page=150" "run page, discards by time, page 150"
ttfb "${url}api/runs/bench/experiments?sort=objective&page=150" "JSON table page (sorted by value, page 150)"
ttfb "${url}runs/bench/experiments/5000" "experiment page"
echo "server peak RSS: $(awk '/VmHWM/ { printf "%.1f MB", $2 / 1024 }' "/proc/$pid/status")"
