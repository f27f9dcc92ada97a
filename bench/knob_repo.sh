# Sourced by the throughput benchmarks (overhead.sh, parallel.sh, store.sh, workers.sh):
#
#   knob_repo VERIFY_COMMAND MAX_EXPERIMENTS [VERIFY_EXTRA] [TAIL]
#
# makes the current (empty) directory a git repository with one commit: params.py (three knobs
# for the knobs proposer) and a hone.toml whose verifier runs VERIFY_COMMAND (written as it is
# into a TOML string), with the lines VERIFY_EXTRA added to [verify], MAX_EXPERIMENTS
# experiments and no patience, then the sections TAIL ([exec], [store]...).
knob_repo() {
  git init -q -b main
  printf 'A = 50  # hone: int 1..1000\nB = 50  # hone: int 1..1000\nC = 0.5  # hone: 0.0..1.0\n' > params.py
  {
    printf '[loop]\neditable = ["params.py"]\n\n[verify]\ncommand = "%s"\nmetric = "score"\n' "$1"
    if [ -n "${3:-}" ]; then printf '%s\n' "$3"; fi
    printf '\n[stop]\nmax_experiments = %s\npatience = 100000\n' "$2"
    if [ -n "${4:-}" ]; then printf '\n%s\n' "$4"; fi
  } > hone.toml
  git add -A && git -c user.name=b -c user.email=b@b commit -qm init
}
