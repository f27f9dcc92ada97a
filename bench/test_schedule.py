#!/usr/bin/env python3
"""What the CLI tests' order costs at N test threads: replays libtest's schedule (tests started
in the order of their names, each free thread taking the next) on per-test times that
`cargo nextest run` measured, once with the names as they are and once with each RENAME
undone, and prints both wall times (the time the last test ends) and the sum of the times.

    cargo nextest run -p hone-cli --features test-agent --test cli -j 2 > nextest.txt
    python3 bench/test_schedule.py nextest.txt [--threads 2] [--rename batch::=slurm::]

A paired comparison on the same measured times: only the order differs, not the machine's load.
"""
import argparse
import heapq
import re


def times(path):
    out = {}
    for line in open(path, encoding="utf-8"):
        m = re.search(r"(PASS|FAIL)\s*\[\s*([0-9.]+)s\]\s*\(\s*\d+/\d+\)\s*\S+\s+(\S+)", line)
        if m:
            out[m.group(3)] = float(m.group(2))
    return out


def wall(durations, threads):
    """libtest's schedule: names sorted, each free thread starts the next test."""
    free = [0.0] * threads
    end = 0.0
    for _, d in sorted(durations):
        start = heapq.heappop(free)
        heapq.heappush(free, start + d)
        end = max(end, start + d)
    return end


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("nextest_output")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rename", action="append", default=["batch::=slurm::"],
                    help="NEW=OLD: the module prefix before the rename")
    a = ap.parse_args()
    t = times(a.nextest_output)
    now = [(n, d) for n, d in t.items()]
    renames = [r.split("=", 1) for r in a.rename]
    before = []
    for n, d in now:
        for new, old in renames:
            if n.startswith(new):
                n = old + n[len(new):]
        before.append((n, d))
    print(f"{len(t)} tests, sum of their times {sum(t.values()):.1f} s")
    print(f"names before the rename: {wall(before, a.threads):.1f} s at {a.threads} threads")
    print(f"names now:               {wall(now, a.threads):.1f} s at {a.threads} threads")
    print(f"lower bound (sum / threads, or the longest test): "
          f"{max(sum(t.values()) / a.threads, max(t.values())):.1f} s")


if __name__ == "__main__":
    main()
