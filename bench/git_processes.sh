#!/usr/bin/env bash
# git processes per experiment of `hone run`: the knobs proposer and the no-op verifier on a
# knob repository (`knob_repo` in bench/lib.sh), with a `git` first on PATH that logs each call's
# subcommand and runs the real git.
#
#   HONE=path/to/hone bench/git_processes.sh [EXPERIMENTS]      (default 50)
set -euo pipefail
n=${1:-50}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
real=$(command -v git)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cd "$d"
knob_repo "echo score: 1" "$n"
mkdir wrap
cat > wrap/git <<WRAP
#!/bin/sh
sub=""; skip=0
for a in "\$@"; do
  if [ \$skip = 1 ]; then skip=0; continue; fi
  case "\$a" in -c) skip=1; continue;; -*) continue;; esac
  sub="\$a"; break
done
echo "\$sub" >> "$d/calls"
exec "$real" "\$@"
WRAP
chmod +x wrap/git
: > calls
PATH="$d/wrap:$PATH" "$hone" run --tag bench > run.txt
total=$(wc -l < calls)
python3 -c "import sys; t,n=int(sys.argv[1]),int(sys.argv[2]); print(f'git processes: {t} for {n} experiments, {t/n:.2f} per experiment')" "$total" "$n"
sort calls | uniq -c | sort -rn
