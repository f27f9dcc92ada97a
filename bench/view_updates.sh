#!/usr/bin/env bash
# Bytes (gzipped) and time to first byte of the run page's live update at N experiments
# (default 100000): the whole update, and the update of a page that holds the current plot and
# every row but the newest one (then the newest ten). Uses a store kept by bench/views.sh:
#
#   STORES=DIR bench/views.sh                       # generates DIR/r100000 once
#   STORES=DIR HONE=path/to/hone bench/view_updates.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-100000}
hone=${HONE:?HONE=path/to/hone}
src=${STORES:?STORES=DIR, as bench/views.sh keeps it}/r$N
# shellcheck source=bench/serve-lib.sh
source "$(dirname "$0")/serve-lib.sh"
serve_scratch
cp -a "$src" "$dir/r"
start_serve "$hone" "$dir/r" "$dir/out"
get() {
  curl -s -f -H "Authorization: Bearer $token" -H "Accept-Encoding: gzip" -o /dev/null \
    -w "%{time_starttransfer} s, %{size_download} bytes gzipped" "$url$1"
  echo "  $1"
}
key=$(curl -s -f -H "Authorization: Bearer $token" "${url}api/runs/bench/view" |
  python3 -c 'import json, sys; print(json.load(sys.stdin).get("plot_key", ""))')
get "runs/bench"
get "api/runs/bench/view"
get "api/runs/bench/view?plot=$key&since=$((N - 1))"
get "api/runs/bench/view?plot=$key&since=$((N - 10))"
