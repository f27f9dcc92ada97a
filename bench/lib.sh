# Sourced by the throughput benchmarks (overhead.sh, parallel.sh, soak.sh, store.sh,
# workers.sh) for the set-up they share:
#
#   source "$(dirname "$0")/lib.sh"
#
# sets `here` (the repository root) and `hone` (the binary to measure: $HONE when it is set,
# to compare two builds in one session; otherwise the release build, built first).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${HONE:-}" ]; then
  cargo build --release --quiet --manifest-path "$here/Cargo.toml" -p hone-cli
fi
hone=${HONE:-${CARGO_TARGET_DIR:-$here/target}/release/hone}

#   knob_repo VERIFY_COMMAND MAX_EXPERIMENTS [VERIFY_EXTRA] [TAIL] [PATIENCE]
#
# makes the current (empty) directory a git repository with one commit: params.py (three knobs
# for the knobs proposer) and a hone.toml whose verifier runs VERIFY_COMMAND (written as it is
# into a TOML string), with the lines VERIFY_EXTRA added to [verify], MAX_EXPERIMENTS
# experiments and no patience (PATIENCE, default 100000, above any run's length), then the
# sections TAIL ([exec], [store]...).
knob_repo() {
  git init -q -b main
  printf 'A = 50  # hone: int 1..1000\nB = 50  # hone: int 1..1000\nC = 0.5  # hone: 0.0..1.0\n' > params.py
  {
    printf '[loop]\neditable = ["params.py"]\n\n[verify]\ncommand = "%s"\nmetric = "score"\n' "$1"
    if [ -n "${3:-}" ]; then printf '%s\n' "$3"; fi
    printf '\n[stop]\nmax_experiments = %s\npatience = %s\n' "$2" "${5:-100000}"
    if [ -n "${4:-}" ]; then printf '\n%s\n' "$4"; fi
  } > hone.toml
  git add -A && git -c user.name=b -c user.email=b@b commit -qm init
}

#   span_row WORKERS BASE_RATE [keeps]
#
# reads log.jsonl (`hone log --json`) in the current directory and prints
# `RATE|| WORKERS | candidates | span | candidates/s | speed-up | 0.9 x WORKERS |` (with a
# `keeps |` column when the third argument is `keeps`): the candidates' span is from the
# first candidate's start to the last one's end (the baseline, which runs alone, left out);
# the speed-up is against BASE_RATE (empty: this is the base, 1.0).
span_row() {
  python3 - "$1" "$2" "${3:-}" <<'PY'
import json, sys
w = int(sys.argv[1])
base = float(sys.argv[2]) if sys.argv[2] else None
rows = [json.loads(l) for l in open("log.jsonl")][1:]
span = max(r["finished_at"] for r in rows) - min(r["started_at"] for r in rows)
rate = len(rows) / span
speed = rate / base if base else 1.0
keeps = f" {sum(r['status'] == 'keep' for r in rows)} |" if sys.argv[3] == "keeps" else ""
print(f"{rate}|| {w} | {len(rows)} | {span:.2f} s | {rate:.2f} | {speed:.2f} | {0.9 * w:.1f} |{keeps}")
PY
}
