#!/usr/bin/env bash
# Every view of a long run: `hone status`, `hone log` (to its first line, and whole to
# /dev/null), `hone show`, `hone report`, and the dashboard's run page, experiment-table page
# and experiment page (time to first byte, and the bytes sent gzipped), on a run of N
# experiments for each N in SIZES (default "10000 100000"); median of REPEAT (default 5)
# runs of each (the run page is also fetched once first, before the server has cached what it
# draws); release build.
#
# The store is written by the `bench-store` example through the store API (statuses,
# descriptions, metrics, configurations, judgements, four events per experiment, a mechanism
# call every tenth); the repository is a real one with two commits, every experiment's
# candidate being the second, so that `hone show` and the experiment page read a real diff.
#
#   bench/views.sh
#   SIZES=10000 REPEAT=3 bench/views.sh
#
# STORES=DIR keeps each generated repository (with its store) in DIR/rN and measures a fresh
# copy of it, so that two builds are measured on the very same store, one after the other,
# without generating it again (a newer build migrates its copy, never DIR's):
#
#   STORES=/tmp/views-stores HONE=old/hone BENCH_STORE=old/bench-store bench/views.sh
#   STORES=/tmp/views-stores HONE=new/hone bench/views.sh
#
# VIEWS=REGEX measures only the views whose names match (e.g. VIEWS='status|page').
#
# The run page's first fetch (nothing cached) is measured FIRST times (default 3), each from a
# server started anew (VIEWS matches that row by the words "run page, its first fetch", with
# bash's regular expressions).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-10000 100000}
REPEAT=${REPEAT:-5}
target=${CARGO_TARGET_DIR:-target}

# HONE=path/to/hone (and BENCH_STORE=path/to/bench-store) measure other builds (two builds
# compared in one session).
if [ -z "${HONE:-}" ]; then
  cargo build -q --release -p hone-cli --bin hone
  cargo build -q --release -p hone-serve --example bench-store
fi
hone=${HONE:-$(cd "$target/release" && pwd)/hone}
bench_store=${BENCH_STORE:-$target/release/examples/bench-store}

# shellcheck source=bench/serve-lib.sh
source "$(dirname "$0")/serve-lib.sh"
serve_scratch

echo "| experiments | view | median | size |"
echo "|---|---|---|---|"
for n in $SIZES; do
  repo="$dir/r$n"
  if [ -n "${STORES:-}" ] && [ -d "$STORES/r$n" ]; then
    cp -a "$STORES/r$n" "$repo"
  else
    mkdir -p "$repo"
    git -C "$repo" init -q -b main
    printf 'LEARNING_RATE = 0.04\nDEPTH = 8\n' > "$repo/train.py"
    git -C "$repo" add -A
    git -C "$repo" -c user.name=bench -c user.email=bench@localhost commit -q -m init
    parent=$(git -C "$repo" rev-parse HEAD)
    printf 'LEARNING_RATE = 0.01\nDEPTH = 12\n' > "$repo/train.py"
    git -C "$repo" -c user.name=bench -c user.email=bench@localhost commit -q -am candidate
    candidate=$(git -C "$repo" rev-parse HEAD)
    git -C "$repo" checkout -q "$parent"
    "$bench_store" "$repo" "$n" "$parent" "$candidate" >/dev/null
    if [ -n "${STORES:-}" ]; then mkdir -p "$STORES" && cp -a "$repo" "$STORES/r$n"; fi
  fi

  # The first fetch of a server started anew, FIRST times.
  : >"$dir/first"
  if [[ "run page, its first fetch" =~ ${VIEWS:-} ]]; then
    for _ in $(seq "${FIRST:-3}"); do
      start_serve "$hone" "$repo" "$dir/serve.out"
      curl -s -f -H "Authorization: Bearer $token" -H "Accept-Encoding: gzip" -o /dev/null \
        -w "%{time_starttransfer} %{size_download}\n" "${url}runs/bench" >>"$dir/first"
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      pid=
    done
  fi
  start_serve "$hone" "$repo" "$dir/serve.out"

  python3 - "$hone" "$repo" "$n" "$REPEAT" "$url" "$token" "$dir/report" "$dir/first" <<'PY'
import statistics, subprocess, sys, time
hone, repo, n, repeat, url, token, report, first = sys.argv[1:]
n, repeat = int(n), int(repeat)
mid = n // 2

import os, re
only = re.compile(os.environ.get("VIEWS", ""))

def row(what, times, size=""):
    print(f"| {n:,} | {what} | {statistics.median(times) * 1000:.1f} ms | {size} |", flush=True)

def command(what, args, sink=subprocess.PIPE):
    if not only.search(what):
        return
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = subprocess.run([hone, "-C", repo, *args], stdout=sink, check=True).stdout
        times.append(time.perf_counter() - t)
    row(what, times, f"{len(out) / 1024:.0f} KiB out" if out is not None else "")

def first_line(what, args):
    if not only.search(what):
        return
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        p = subprocess.Popen([hone, "-C", repo, *args], stdout=subprocess.PIPE)
        p.stdout.readline()
        times.append(time.perf_counter() - t)
        p.kill()
        p.wait()
    row(what, times)

def page(what, path, times_asked=None):
    if not only.search(what):
        return
    times, size = [], 0
    for _ in range(times_asked or repeat):
        out = subprocess.run(
            ["curl", "-s", "-f", "-H", f"Authorization: Bearer {token}", "-H",
             "Accept-Encoding: gzip", "-o", "/dev/null", "-w",
             "%{time_starttransfer} %{size_download}", url + path],
            stdout=subprocess.PIPE, check=True, text=True).stdout.split()
        times.append(float(out[0]))
        size = int(out[1])
    row(what + " (first byte)", times, f"{size / 1024:.1f} KiB gzipped")

command("`hone status`", ["status"])
first_line("`hone log` to its first line", ["log"])
command("`hone log` whole, to /dev/null", ["log"], subprocess.DEVNULL)
command(f"`hone show {mid}`", ["show", str(mid)])
command("`hone report`", ["report", "--out", report])
firsts = [line.split() for line in open(first) if line.strip()]
if firsts:
    row(f"run page, its first fetch (a server started anew, {len(firsts)} samples) (first byte)",
        [float(t) for t, _ in firsts], f"{int(firsts[-1][1]) / 1024:.1f} KiB gzipped")
page("run page, its first fetch (the server below)", "runs/bench", 1)
page("run page", "runs/bench")
page("table page (discards by duration, page 150)", "runs/bench?status=discard&sort=duration&dir=desc&page=150")
page("table page, JSON (by value, page 150)", "api/runs/bench/experiments?sort=objective&page=150")
page(f"experiment page ({mid})", f"runs/bench/experiments/{mid}")
PY
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
  rm -rf "$repo"
done
