#!/usr/bin/env bash
# A build that loads the machine for as long as it runs, as a developer's build beside a run
# would: the committed tree copied to a scratch directory and its `hone` crate rebuilt (debug)
# over and over. For the figures "while another build loads the machine":
#
#   bench/build_load.sh & load=$!
#   sleep 60                       # the first build compiles every dependency
#   bench/parallel.sh 32 1 1 8
#   kill $load                     # stops the build under way too, and removes the copy
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
d=$(mktemp -d)
build=""
stop() {
  if [ -n "$build" ]; then
    pkill -TERM -P "$build" 2>/dev/null || true
    kill -TERM "$build" 2>/dev/null || true
    wait "$build" 2>/dev/null || true
  fi
  rm -rf "$d"
}
trap stop EXIT
trap 'exit 143' TERM INT
git -C "$here" archive HEAD | tar -x -C "$d"
while true; do
  touch "$d/crates/hone/src/lib.rs"
  CARGO_TARGET_DIR="$d/target" cargo build -q -p hone --manifest-path "$d/Cargo.toml" \
    >/dev/null 2>&1 &
  build=$!
  wait "$build" || true
  build=""
done
