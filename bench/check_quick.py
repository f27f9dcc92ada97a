"""Checks the output of `hone bench --quick` (used by .ci/run): the three files exist, every
run has its budget's verifications, and every regret lies within [0, 1] up to rounding (the
incumbent never gets worse than the baseline, and no problem can beat its optimum)."""

import json
import os
import sys

out = sys.argv[1]
for name in ("runs.json", "results.json", "results.md"):
    path = os.path.join(out, name)
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        sys.exit("hone bench --quick: %s is missing or empty" % path)
runs = json.load(open(os.path.join(out, "runs.json")))["runs"]
report = json.load(open(os.path.join(out, "results.json")))
if len(runs) < 2 * 2 * 3:
    sys.exit("hone bench --quick: expected at least 12 runs, found %d" % len(runs))
for r in runs:
    if len(r["trajectory"]) + r["unverified"] < r["budget"] or len(r["trajectory"]) == 0:
        sys.exit("hone bench --quick: run %s/%s/%s is short" % (r["problem"], r["arm"], r["seed"]))
cells = 0
for p in report["problems"]:
    for a in p["arms"]:
        for at in a["at"]:
            for x in (at["median"], at["mean"], at["ci95"][0], at["ci95"][1]):
                if x is None or not (-1e-9 <= x <= 1.0 + 1e-9):
                    sys.exit("hone bench --quick: %s/%s regret %r outside [0, 1]" % (p["name"], a["arm"], x))
            cells += 1
if cells < 4:
    sys.exit("hone bench --quick: expected 4 (problem, arm) cells, found %d" % cells)
print("hone bench --quick: %d runs, %d (problem, arm) cells, all regrets within [0, 1]" % (len(runs), cells))
