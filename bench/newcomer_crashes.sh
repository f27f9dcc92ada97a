#!/usr/bin/env bash
# Crashes a new user meets (issue 17, "6 of 30 and 12 of 14 experiments crashed"): `hone init`,
# then `hone run --seed S -n BUDGET` with the drafted hone.toml as it is, on the two stand-ins
# the CLI tests use (crates/hone-cli/tests/fixtures): a scikit-learn MLPClassifier script that
# refuses a momentum outside [0, 1], and an autoresearch-shaped repository (`uv run train.py`,
# run through a uv shim) that fails where the real program does (a batch that does not divide,
# a fraction or a beta out of range, a device batch that does not fit in memory). Prints one
# line per stand-in and seed (crashes among the experiments after the baseline, the best
# value; a run whose baseline did not pass is said and not counted), then the mean per
# stand-in. `sklearn-wide` is the scikit-learn stand-in with the ranges an older `hone init`
# drafted for its searched knobs written on their lines (MOMENTUM log 0.09..9: about half of it
# crashes); MAX_ITER and TEST_SIZE, which that init also searched, are fixed. Every binary then
# searches the same ranges, so two binaries' crashes compare the search alone. An old binary
# works too, for a before and after; INIT=OTHER_HONE drafts hone.toml with another binary.
#
#   [INIT=HONE_BINARY] [STANDINS="sklearn sklearn-wide autoresearch"] [WORKERS=1] \
#     bench/newcomer_crashes.sh HONE_BINARY [SEEDS] [BUDGET]   (default 5 30)
set -euo pipefail
# A path is made absolute (runs happen in other directories); a bare name is looked up on PATH.
abs() { case $1 in */*) echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" ;; *) command -v "$1" ;; esac; }
hone=$(abs "$1")
seeds=${2:-5}
budget=${3:-30}
init=$(abs "${INIT:-$hone}")
here=$(cd "$(dirname "$0")/.." && pwd)
fixtures="$here/crates/hone-cli/tests/fixtures"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir "$d/bin"
printf '#!/bin/sh\nshift\nexec python3 "$@"\n' > "$d/bin/uv"
chmod +x "$d/bin/uv"
commit() { git -C "$1" -c user.name=bench -c user.email=bench@localhost commit -qm "$2"; }
for standin in ${STANDINS:-sklearn sklearn-wide autoresearch}; do
  for s in $(seq 1 "$seeds"); do
    r="$d/$standin-$s"
    cp -r "$fixtures/${standin%-wide}" "$r"
    if [ "$standin" = sklearn-wide ]; then
      sed -i -E 's/^(LEARNING_RATE_INIT = .*)$/\1  # hone: log 0.0001..0.01/;
        s/^(MOMENTUM = .*)$/\1  # hone: log 0.09..9/; s/^(ALPHA = .*)$/\1  # hone: log 0.00001..0.001/;
        s/^(HIDDEN = .*)$/\1  # hone: int log 16..256/;
        s/^((MAX_ITER|TEST_SIZE|RANDOM_STATE) = .*)$/\1  # hone: fixed/' "$r/train.py"
    fi
    printf '.hone/\n__pycache__/\n' > "$r/.gitignore"
    if [ "$standin" = autoresearch ]; then
      printf '[project]\nname = "autoresearch"\nversion = "0.1.0"\n' > "$r/pyproject.toml"
      printf 'version = 1\n' > "$r/uv.lock"
    fi
    git -C "$r" init -q -b main
    git -C "$r" add -A
    commit "$r" "$standin"
    (cd "$r" && PATH="$d/bin:$PATH" "$init" init >/dev/null 2>&1) || true
    # What a user fixes before the first run where an older init guessed it wrong: the metric
    # the program prints and its direction (the knobs' drafted ranges are left as they are).
    if [ "$standin" != autoresearch ]; then metric=accuracy direction=maximize; else metric=val_bpb direction=minimize; fi
    sed -i -E "s/^metric( *)= *\"[^\"]*\"/metric\1= \"$metric\"/; s/^direction( *)= *\"[^\"]*\"/direction\1= \"$direction\"/" "$r/hone.toml"
    grep -q "^metric *= *\"$metric\"" "$r/hone.toml" && grep -q "^direction *= *\"$direction\"" "$r/hone.toml" \
      || echo "warning: $standin seed $s: hone.toml has no metric or direction line to fix" >&2
    git -C "$r" add -A
    commit "$r" "hone init"
    (cd "$r" && PATH="$d/bin:$PATH" "$hone" run --seed "$s" -n "$budget" --workers "${WORKERS:-1}" >/dev/null 2>&1) || true
    (cd "$r" && "$hone" log --json) | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
after = [r for r in rows if r["status"] != "baseline"]
crashes = sum(r["status"] == "crash" for r in after)
base = next((r["status"] for r in rows if r.get("n") == 0), "none")
sign = 1 if sys.argv[1].startswith("sklearn") else -1
best = max((sign * r["objective"] for r in rows if r["status"] in ("baseline", "keep")),
           default=float("nan")) * sign
if base != "baseline":
    # A run that did not start (or whose baseline failed) measures nothing: said, not counted.
    print("%s seed %s: FAILED (baseline: %s): not counted" % (sys.argv[1], sys.argv[2], base))
else:
    print("%s seed %s: %d crashes of %d experiments after the baseline (baseline: %s), best %.6g"
          % (sys.argv[1], sys.argv[2], crashes, len(after), base, best))
' "$standin" "$s"
  done
done | tee "$d/out"
python3 - "$d/out" <<'PY'
import re, statistics, sys
by = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) seed \S+: (\d+) crashes of (\d+).*best (\S+)", line)
    if m:
        by.setdefault(m.group(1), []).append(
            (int(m.group(2)), int(m.group(3)), float(m.group(4))))
failed = sum(" FAILED " in line for line in open(sys.argv[1]))
if failed:
    print("%d runs FAILED and are not counted" % failed)
for name, rows in by.items():
    c = [r[0] for r in rows]
    print("%s: mean %.2f crashes of %.1f experiments (%d seeds; median %.1f); best value median %.6g"
          % (name, statistics.mean(c), statistics.mean(r[1] for r in rows), len(rows),
             statistics.median(c), statistics.median(r[2] for r in rows)))
PY
