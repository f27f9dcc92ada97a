#!/usr/bin/env bash
# The cost of recording progress points (issue 17): a verifier printing POINTS (default
# 2000) `step=K loss=V` lines at once, with and without `[verify] progress` (the baseline
# only, three runs each); prints verify_ms of experiment 0 and the points stored.
set -euo pipefail
hone=${1:?usage: bench/prune_points.sh path/to/hone [POINTS]}; n=${2:-2000}
for arm in none progress; do
  for i in 1 2 3; do
    d=$(mktemp -d); cd "$d"; git init -q -b main
    printf 'X = 1  # hone: int 1..9\n' > k.py
    extra=""; [ $arm = progress ] && extra='progress = "loss"'
    cat > hone.toml <<TOML
[loop]
editable = ["k.py"]
[verify]
command = "python3 -c 'import sys\nfor k in range(1, $n + 1): sys.stdout.write(\"step=%d loss=%f\\\\n\" % (k, 1.0 / k))\nprint(\"score: 1\")'"
metric = "score"
$extra
[stop]
max_experiments = 1
TOML
    git add -A; git -c user.name=b -c user.email=b@b commit -qm i
    "$hone" run --tag c > /dev/null 2>&1 || { cat .hone/runs/c/logs/0.log 2>/dev/null | head; }
    ms=$("$hone" log --json | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["verify_ms"])')
    pts=$(python3 -c "import sqlite3; print(sqlite3.connect('.hone/hone.db').execute('select count(*) from curves').fetchone()[0])")
    echo "$arm run $i: verify_ms=$ms points=$pts"
    cd /; rm -rf "$d"
  done
done
