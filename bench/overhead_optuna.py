"""Optuna's side of bench/overhead_optuna.sh: N trials of TPE on the three knobs of
bench/lib.sh's `knob_repo` (A, B int 1..1000; C float 0..1), each trial doing what one hone
experiment does with the knobs proposer and a no-op verifier: the values written into
params.py, the verifier `echo score: 1` run as a subprocess through `sh -c` (as hone runs
`[verify] command`), its `score` line parsed, the result told to the study.

    python3 overhead_optuna.py STORAGE N DIR [MEASURED]      STORAGE: memory | sqlite

With MEASURED below N, the study is first given N - MEASURED finished trials (seeded random
values, score 1, added with `add_trials`: no sampler, no verifier) and only the last MEASURED
trials run and are timed: the per-trial cost at a history of N without waiting for all of it.

Prints one JSON line: per-trial overhead (trial wall time minus the verifier subprocess's
time, measured around the subprocess exactly as hone's verify_ms is: spawn to exit), the
sampler's share of it (ask + suggest), and the whole run's wall time. Run through
bench/overhead_optuna.sh, which makes the virtual environment.
"""

import json
import os
import random
import re
import statistics
import subprocess
import sys
import time

import optuna

SCORE = re.compile(r"^\s*score\s*[:=]\s*([-+0-9.eE]+)\s*$", re.M)


def main():
    storage, n, workdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    measured = int(sys.argv[4]) if len(sys.argv) > 4 else n
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = None if storage == "memory" else f"sqlite:///{os.path.join(workdir, 'optuna.db')}"
    start = time.perf_counter()
    study = optuna.create_study(
        storage=url, sampler=optuna.samplers.TPESampler(seed=0), direction="maximize"
    )
    preload = n - measured
    if preload > 0:
        rng = random.Random(0)
        dists = {
            "A": optuna.distributions.IntDistribution(1, 1000),
            "B": optuna.distributions.IntDistribution(1, 1000),
            "C": optuna.distributions.FloatDistribution(0.0, 1.0),
        }
        study.add_trials(
            optuna.trial.create_trial(
                params={"A": rng.randint(1, 1000), "B": rng.randint(1, 1000), "C": rng.random()},
                distributions=dists,
                value=1.0,
            )
            for _ in range(preload)
        )
    else:
        # The baseline first, as hone's experiment 0 is.
        study.enqueue_trial({"A": 50, "B": 50, "C": 0.5})
    start = time.perf_counter()
    params = os.path.join(workdir, "params.py")
    over, sample, verify = [], [], []
    for _ in range(measured):
        t0 = time.perf_counter()
        trial = study.ask()
        a = trial.suggest_int("A", 1, 1000)
        b = trial.suggest_int("B", 1, 1000)
        c = trial.suggest_float("C", 0.0, 1.0)
        t1 = time.perf_counter()
        with open(params, "w") as f:
            f.write(f"A = {a}  # hone: int 1..1000\nB = {b}  # hone: int 1..1000\n")
            f.write(f"C = {c!r}  # hone: 0.0..1.0\n")
        v0 = time.perf_counter()
        out = subprocess.run(
            ["sh", "-c", "echo score: 1"], cwd=workdir, capture_output=True, text=True
        ).stdout
        v1 = time.perf_counter()
        m = SCORE.search(out)
        if m:
            study.tell(trial, float(m.group(1)))
        else:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        t2 = time.perf_counter()
        over.append((t2 - t0 - (v1 - v0)) * 1000)
        sample.append((t1 - t0) * 1000)
        verify.append((v1 - v0) * 1000)
    wall = time.perf_counter() - start
    s = sorted(over)
    excl = sorted(o - p for o, p in zip(over, sample))
    print(
        json.dumps(
            {
                "n": n,
                "measured": measured,
                "median_ms": statistics.median(over),
                "p90_ms": s[int(len(s) * 0.9)],
                "median_excl_sampler_ms": statistics.median(excl),
                "p90_excl_sampler_ms": excl[int(len(excl) * 0.9)],
                "sampler_mean_ms": sum(sample) / measured,
                "verify_mean_ms": sum(verify) / measured,
                "wall_clock_overhead_mean_ms": (wall * 1000 - sum(verify)) / measured,
                "wall_s": wall,
            }
        )
    )


if __name__ == "__main__":
    main()
