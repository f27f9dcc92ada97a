#!/usr/bin/env bash
# A soak run: N experiments (default 100,000) of the knobs proposer with a no-op verifier in
# one run, killed with SIGKILL halfway and resumed once. Reports the peak resident memory of
# `hone run` (VmHWM) when the run reaches N/10 experiments and at its end, that nothing
# finished was lost (every experiment finished before the kill is there, as it was; no row is
# left `running`; the numbers are 0..N-1), and the repository's size per 1,000 experiments
# once git has packed its refs and objects (`git pack-refs --all`, `git gc`), with the
# store's.
#
#   bench/soak.sh [N]        (HONE=path/to/hone to measure another build)
set -euo pipefail
n=${1:-100000}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
d=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -rf "$d"
}
trap cleanup EXIT
cd "$d"
knob_repo "echo score: 1" "$n" "" "" 1000000000

# Polls the store (read-only) and the process: prints "tenth count hwm_kb", "stop count
# hwm_kb" and "end hwm_kb" lines, and to stderr a progress line every `every` experiments.
# The count is read from the run's tallies (a row per status, kept by the store with every
# write), so each poll costs the same at 100,000 experiments as at 10.
watch() {
  python3 - "$1" "$2" "$3" "$4" <<'PY'
import sqlite3, sys, time, os
pid, stop_at, tenth, every = (int(a) for a in sys.argv[1:5])
db = ".hone/hone.db"
t0 = time.time()
next_report = None
hwm_at_tenth = None
def hwm():
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
last = None
while True:
    try:
        os.kill(pid, 0)
    except OSError:
        break
    h = hwm()
    if h is not None:
        last = h
    count = 0
    if os.path.exists(db):
        try:
            c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
            count = c.execute("SELECT COALESCE(SUM(experiments), 0) FROM run_tallies WHERE status != 'running'").fetchone()[0]
            c.close()
        except sqlite3.Error:
            pass
    if next_report is None:
        next_report = (count // every + 1) * every
    elif count >= next_report:
        rss = f"{h / 1024:.1f} MB" if h is not None else "?"
        print(f"soak: {count} finished, peak RSS {rss}, {time.time() - t0:.0f} s in this process", file=sys.stderr, flush=True)
        while next_report <= count:
            next_report += every
    if hwm_at_tenth is None and count >= tenth and h is not None:
        hwm_at_tenth = h
        print(f"tenth {count} {h}", flush=True)
    if count >= stop_at:
        print(f"stop {count} {last}", flush=True)
        break
    time.sleep(0.2)
print(f"end {last}", flush=True)
PY
}

# Progress to stderr every `every` experiments: a tenth of the run, 2,000 at most.
every=$((n / 10 < 2000 ? n / 10 : 2000))
every=$((every < 1 ? 1 : every))
start=$(date +%s)
echo "soak: $n experiments with $hone in $d (killed at $((n / 2)), then resumed)" >&2
"$hone" run --tag soak > run1.txt 2>&1 &
pid=$!
watch "$pid" $((n / 2)) $((n / 10)) "$every" > watch1.txt
# The kill: whatever the loop is doing at this moment.
kill -9 "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
pid=
python3 - > before.json <<'PY'
import sqlite3, json
c = sqlite3.connect("file:.hone/hone.db?mode=ro", uri=True)
rows = c.execute("SELECT n, status, objective FROM experiments WHERE finished_at IS NOT NULL ORDER BY n").fetchall()
print(json.dumps(rows))
PY
"$hone" run > run2.txt 2>&1 &
pid=$!
echo "soak: killed after $(($(date +%s) - start)) s; resuming" >&2
watch "$pid" $((n + 1)) $((n + 1)) "$every" > watch2.txt
wait "$pid" || { echo "the resumed run failed:"; tail -5 run2.txt; exit 1; }
pid=
end=$(date +%s)
git pack-refs --all
git gc -q
python3 - "$n" "$start" "$end" <<'PY'
import sqlite3, json, subprocess, sys, os
n, start, end = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
c = sqlite3.connect("file:.hone/hone.db?mode=ro", uri=True)
rows = c.execute("SELECT n, status, objective FROM experiments ORDER BY n").fetchall()
before = [tuple(r) for r in json.load(open("before.json"))]
now = {r[0]: tuple(r) for r in rows}
lost = [r for r in before if now.get(r[0]) != r]
running = [r[0] for r in rows if r[1] == "running"]
aborted = [r[0] for r in rows if r[1] == "aborted"]
numbers_ok = [r[0] for r in rows] == list(range(len(rows)))
w1 = open("watch1.txt").read().split("\n")
w2 = open("watch2.txt").read().split("\n")
tenth_n, tenth = next((int(l.split()[1]), int(l.split()[2])) for l in w1 if l.startswith("tenth"))
end1 = next(int(l.split()[1]) for l in w1 if l.startswith("end"))
end2 = next(int(l.split()[1]) for l in w2 if l.startswith("end"))
def du(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total
git = du(".git")
store = sum(os.path.getsize(p) for p in [".hone/hone.db", ".hone/hone.db-wal"] if os.path.exists(p))
refs = int(subprocess.run(["git", "for-each-ref", "--count=100000000", "--format=x"], capture_output=True, text=True).stdout.count("x"))
print(f"experiments: {len(rows)} of {n} in {end - start} s ({len(rows) / max(end - start, 1):.1f}/s)")
print(f"killed at {len(before)} finished; after the resume: lost {len(lost)}, left running {len(running)}, aborted {aborted}, numbers 0..{len(rows)-1} without a gap: {numbers_ok}")
print(f"peak RSS of the first process at {n // 10}: {tenth / 1024:.1f} MB; at the kill ({len(before)}): {end1 / 1024:.1f} MB")
print(f"peak RSS of the resumed process at the end ({len(rows)}): {end2 / 1024:.1f} MB; ratio end / tenth: {end2 / tenth:.2f}")
grown = (end1 - tenth) * 1024 / max(len(before) - tenth_n, 1)
print(f"peak RSS growth of the first process from {tenth_n} to the kill: {grown:.0f} bytes per experiment")
print(f"repository (.git, packed): {git / 1e6:.2f} MB, {git / len(rows) * 1000 / 1e3:.1f} KB per 1,000 experiments; refs {refs}")
print(f"store (.hone/hone.db): {store / 1e6:.2f} MB, {store / len(rows) * 1000 / 1e3:.1f} KB per 1,000 experiments")
PY
