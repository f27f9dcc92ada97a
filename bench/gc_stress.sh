#!/bin/bash
# git gc --prune=now against whole runs (bench/RESULTS.md, "Faults"): for each of RUNS fresh
# repositories, a background loop runs `git gc --prune=now` back to back while `hone run`
# makes 15 experiments and a resume makes 5 more; then the repository is checked (`git fsck`,
# `git log --all`). Prints one line per run and the totals.
#
#   cargo build -p hone-cli --features test-agent && RUNS=20 bench/gc_stress.sh
#
# BIN: the directory holding `hone` and `fake-agent` (default: target/debug, or
# $CARGO_TARGET_DIR/debug).
set -u
BIN=${BIN:-${CARGO_TARGET_DIR:-$(cd "$(dirname "$0")/.." && pwd)/target}/debug}
RUNS=${RUNS:-10}
ok=0; resumed=0; whole=0; lost_total=0
for i in $(seq 1 "$RUNS"); do
  d=$(mktemp -d); cd "$d" || exit 1
  git init -q -b main
  printf 'score: 50\n' > value.txt; printf '# eval\n' > prepare.py
  printf 'run\tn=${HONE_EXPERIMENT:-1}; printf "score: %%s\\n" $((50 - n)) > value.txt; seq $n 2000 > big.txt\n' > script
  cat > hone.toml <<T
[loop]
editable = ["value.txt", "big.txt"]
protected = ["prepare.py"]

[verify]
command = "cat value.txt"
metric = "score"
timeout = "60s"

[agent]
kind = "command"
command = "$BIN/fake-agent $d/script"

[stop]
max_experiments = 15
T
  git add -A; git -c user.name=t -c user.email=t@t commit -qm init
  ( while [ ! -f stop ]; do git gc --prune=now --quiet 2>/dev/null; done ) &
  gc=$!
  "$BIN/hone" run --tag g > run.out 2>&1; rc=$?
  "$BIN/hone" run --tag g -n 20 > resume.out 2>&1; rc2=$?
  touch stop; wait $gc
  fsck=$(git fsck --no-progress --no-dangling 2>&1 | wc -l)
  if git log --all --oneline > /dev/null 2>&1; then logall=0; else logall=1; fi
  n=$("$BIN/hone" log --json 2>/dev/null | wc -l)
  lost=$("$BIN/hone" log --json 2>/dev/null | grep -c '"reason":"lost:')
  echo "run $i: exit $rc, resume exit $rc2, $n experiments ($lost lost), fsck lines $fsck, git log --all exit $logall"
  [ "$rc" = 0 ] && ok=$((ok+1)); [ "$rc2" = 0 ] && resumed=$((resumed+1))
  [ "$fsck" = 0 ] && [ "$logall" = 0 ] && whole=$((whole+1)); lost_total=$((lost_total+lost))
  if [ "$rc" != 0 ] || [ "$rc2" != 0 ]; then tail -n 3 run.out; tail -n 3 resume.out; fi
  cd / && rm -rf "$d"
done
echo "runs that finished: $ok/$RUNS; resumes that made progress: $resumed/$RUNS; repositories whole: $whole/$RUNS; experiments lost (recorded aborted): $lost_total"
