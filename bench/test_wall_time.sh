#!/usr/bin/env bash
# Paired wall time of the CLI integration tests (`cargo test -p hone-cli --test cli`) at two
# commits, alternated, each built first so that only the tests are timed:
#
#   bench/test_wall_time.sh OLD_CHECKOUT NEW_CHECKOUT [extra test args, e.g. -- --test-threads=1]
#
# OLD_CHECKOUT is a worktree of the older commit (`git worktree add ../old 4c92571`); each
# side builds in its own target directory. As root with a SLURM cluster up
# (scripts/slurm-local.sh) and HONE_REQUIRE_SLURM=1 HONE_REQUIRE_POSTGRES=1 exported, the SLURM
# and PostgreSQL tests run, as in CI.
set -euo pipefail
old=$(cd "$1" && pwd); new=$(cd "$2" && pwd); shift 2
(cd "$old" && CARGO_TARGET_DIR="$old/target" cargo test -q -p hone-cli --test cli --no-run)
(cd "$new" && CARGO_TARGET_DIR="$new/target" cargo test -q -p hone-cli --test cli --no-run)
for round in 1 2; do
  for side in old new; do
    if [ $side = old ]; then dir=$old; else dir=$new; fi
    start=$(date +%s.%N)
    log=$(mktemp)
    (cd "$dir" && CARGO_TARGET_DIR="$dir/target" cargo test -q -p hone-cli --test cli "$@" > "$log" 2>&1)
    end=$(date +%s.%N)
    printf '%s round %s: %.1f s (%s)\n' $side $round "$(echo "$end - $start" | bc)" "$(grep -E '^test result' "$log" | tail -1)"
    rm -f "$log"
  done
done
