#!/usr/bin/env python3
"""Compares the knobs sampler's in-process figures (`tune_sampler` with OUT=file: lines of
`problem seed regret@20 regret@50 regret@100`) with each other and with Optuna's stored runs.

    python3 bench/sampler_compare.py BEFORE AFTER [--optuna runs.json ...] [--markdown]

For every problem and budget: the median normalised regret of BEFORE and AFTER (same seeds,
paired), of each Optuna sampler in the runs given, the p-value of BEFORE vs AFTER (paired
sign-flip test on the per-seed differences) and of AFTER vs each Optuna sampler on the seeds
both have (seed-matched; for Optuna the pairs share nothing but the seed number, so this is in
effect an unpaired test). Regret for Optuna is normalised with bench/problems/manifest.toml.
"""

import argparse
import itertools
import json
import os
import random
import statistics

BUDGETS = (20, 50, 100)


def read_harness(path):
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 2 + len(BUDGETS):
                continue
            problem, seed = parts[0], int(parts[1])
            for b, v in zip(BUDGETS, parts[2:]):
                out.setdefault((problem, b), {})[seed] = float(v)
    return out


def read_manifest():
    here = os.path.dirname(os.path.abspath(__file__))
    problems, cur = {}, None
    with open(os.path.join(here, "problems", "manifest.toml")) as f:
        for line in f:
            line = line.split("#")[0].strip()
            if line == "[[problem]]":
                cur = {}
            elif "=" in line and cur is not None:
                k, v = (x.strip() for x in line.split("=", 1))
                cur[k] = v.strip('"')
                if k == "name":
                    problems[cur["name"]] = cur
    return problems


def read_optuna(paths, manifest):
    out = {}
    for path in paths:
        with open(path) as f:
            runs = json.load(f)["runs"]
        for r in runs:
            p = manifest.get(r["problem"])
            if p is None:
                continue
            opt, base = float(p["optimum"]), float(p["baseline"])
            arm = r["arm"].replace("optuna-", "")
            t = r["trajectory"]
            for b in BUDGETS:
                if len(t) >= b:
                    reg = (t[b - 1] - opt) / (base - opt)
                    out.setdefault((arm, r["problem"], b), {})[r["seed"]] = reg
    return out


def sign_flip_p(diffs):
    """Two-sided sign-flip permutation p of the mean difference: exact up to 16 pairs, else
    50,000 random flips (fixed seed)."""
    diffs = [d for d in diffs]
    n = len(diffs)
    if n == 0:
        return float("nan")
    obs = abs(sum(diffs))
    eps = 1e-12 * (1 + obs)
    if n <= 16:
        hits = total = 0
        for signs in itertools.product((1, -1), repeat=n):
            total += 1
            hits += abs(sum(s * d for s, d in zip(signs, diffs))) >= obs - eps
        return hits / total
    rng = random.Random(0)
    hits, total = 1, 50_000
    for _ in range(total - 1):
        hits += abs(sum(d if rng.random() < 0.5 else -d for d in diffs)) >= obs - eps
    return hits / total


def fmt(x):
    if x != x:
        return "–"
    return "%.2g" % x if abs(x) < 0.001 and x != 0 else "%.4f" % x


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--optuna", action="append", default=[])
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    before, after = read_harness(a.before), read_harness(a.after)
    optuna = read_optuna(a.optuna, read_manifest())
    arms = sorted({k[0] for k in optuna}, key=lambda s: ["tpe", "cmaes", "gp", "random"].index(s)
                  if s in ("tpe", "cmaes", "gp", "random") else 9)
    problems = []
    for (p, _b) in after:
        if p not in problems:
            problems.append(p)
    head = ["problem", "b", "hone before", "hone after", "p after vs before"]
    for arm in arms:
        head += [arm, "p after vs " + arm]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    mb_before = {b: [] for b in BUDGETS}
    mb_after = {b: [] for b in BUDGETS}
    mb_arm = {(arm, b): [] for arm in arms for b in BUDGETS}
    for p in problems:
        for b in BUDGETS:
            x, y = before.get((p, b), {}), after.get((p, b), {})
            seeds = sorted(set(x) & set(y))
            mx = statistics.median(x[s] for s in seeds) if seeds else float("nan")
            my = statistics.median(y[s] for s in seeds) if seeds else float("nan")
            mb_before[b].append(mx)
            mb_after[b].append(my)
            row = [p, str(b), fmt(mx), fmt(my),
                   "%.3f" % sign_flip_p([y[s] - x[s] for s in seeds])]
            for arm in arms:
                o = optuna.get((arm, p, b), {})
                if not o:
                    row += ["–", "–"]
                    continue
                mo = statistics.median(o.values())
                mb_arm[(arm, b)].append(mo)
                common = sorted(set(o) & set(y))
                row += [fmt(mo), "%.3f" % sign_flip_p([y[s] - o[s] for s in common])]
            print("| " + " | ".join(row) + " |")
    for b in BUDGETS:
        line = "mean of medians @%d: before %s, after %s" % (
            b, fmt(statistics.mean(mb_before[b])), fmt(statistics.mean(mb_after[b])))
        for arm in arms:
            v = mb_arm[(arm, b)]
            if len(v) == len(problems):
                line += ", %s %s" % (arm, fmt(statistics.mean(v)))
        print(line)


if __name__ == "__main__":
    main()
