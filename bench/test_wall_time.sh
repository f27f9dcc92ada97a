#!/usr/bin/env bash
# Paired wall time of the CLI integration tests (`cargo test -p hone-cli --test cli`) at two
# commits, alternated, each built first so that only the tests are timed:
#
#   bench/test_wall_time.sh OLD_CHECKOUT NEW_CHECKOUT [extra libtest args, e.g. --test-threads=1]
#
# OLD_CHECKOUT is a worktree of the older commit (`git worktree add ../old 4c92571`); each
# side builds in its own target directory. Only the tests both sides have run (matched by the
# test function's name, since the newer side files them under topic modules), so tests added
# since the older commit do not count against the newer one; the count is printed. A side whose
# hone-cli has the `test-agent` feature is built with it (it builds the scripted agent). As
# root with a SLURM cluster up (scripts/slurm-local.sh) and HONE_REQUIRE_SLURM=1
# HONE_REQUIRE_POSTGRES=1 exported, the SLURM and PostgreSQL tests run, as in CI.
set -euo pipefail
old=$(cd "$1" && pwd); new=$(cd "$2" && pwd); shift 2
features() { grep -q '^test-agent' "$1/crates/hone-cli/Cargo.toml" && echo "--features test-agent" || true; }
run_tests() { # dir, then libtest arguments
  local dir=$1; shift
  (cd "$dir" && CARGO_TARGET_DIR="$dir/target" cargo test -q -p hone-cli $(features "$dir") --test cli -- "$@")
}
for dir in "$old" "$new"; do
  (cd "$dir" && CARGO_TARGET_DIR="$dir/target" cargo build -q -p hone-cli $(features "$dir") --bins)
  (cd "$dir" && CARGO_TARGET_DIR="$dir/target" cargo test -q -p hone-cli $(features "$dir") --test cli --no-run)
done
list() { run_tests "$1" --list --format terse 2>/dev/null | sed -n 's/: test$//p' | sort; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
list "$old" > "$tmp/old"; list "$new" > "$tmp/new"
# The function name is the last path segment; keep the names both sides have once.
awk -F'::' '{print $NF}' "$tmp/old" | sort | uniq -u > "$tmp/old.short"
awk -F'::' '{print $NF}' "$tmp/new" | sort | uniq -u > "$tmp/new.short"
comm -12 "$tmp/old.short" "$tmp/new.short" > "$tmp/common"
pick() { awk -F'::' 'NR==FNR {keep[$0]=1; next} ($NF in keep)' "$tmp/common" "$1"; }
pick "$tmp/old" > "$tmp/old.run"; pick "$tmp/new" > "$tmp/new.run"
echo "tests: $(wc -l < "$tmp/old") before, $(wc -l < "$tmp/new") after, $(wc -l < "$tmp/common") in both (timed)"
for round in 1 2; do
  for side in old new; do
    if [ $side = old ]; then dir=$old; else dir=$new; fi
    start=$(date +%s.%N)
    log="$tmp/log"
    mapfile -t names < "$tmp/$side.run"
    run_tests "$dir" --exact "${names[@]}" "$@" > "$log" 2>&1 || { tail -30 "$log"; exit 1; }
    end=$(date +%s.%N)
    printf '%s round %s: %.1f s (%s)\n' $side $round "$(echo "$end - $start" | bc)" "$(grep -E '^test result' "$log" | tail -1)"
  done
done
