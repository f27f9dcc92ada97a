"""Optuna's MedianPruner on the pruning benchmark's synthetic learning curves
(bench/prune/curve.py), beside no pruner: TPE proposes LR, WIDTH and DECAY in the ranges of
bench/prune/knobs.py; a trial reports its loss at every step and, with the pruner, stops when
should_prune() says so. Verifier time is counted as steps run x STEP_SECONDS, the per-step
cost of hone's verifier in bench/prune.sh. The pruned arm gets the same verifier time as the
unpruned one's TRIALS full trials: it runs up to CAP (2) times as many, cut where that time is
spent.
Prints one JSON object per arm."""

import argparse
import json
import os
import statistics
import sys

import optuna

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "prune"))
import curve  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)


def run(seed, trials, pruner, budget):
    """`trials` trials, or fewer: those that fit in `budget` steps (the best so far counted
    where the budget ran out)."""
    steps = [0]

    def objective(trial):
        lr = trial.suggest_float("LR", 1e-4, 1.0, log=True)
        width = trial.suggest_int("WIDTH", 8, 512)
        decay = trial.suggest_float("DECAY", 0.0, 1.0)
        key = curve.key(seed, trial.number + 1)
        for step in range(1, curve.STEPS + 1):
            steps[0] += 1
            trial.report(curve.loss(lr, width, decay, step, key), step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return curve.final(lr, width, decay)

    sampler = optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(sampler=sampler, pruner=pruner)
    used = []
    for _ in range(trials):
        before = steps[0]
        study.optimize(objective, n_trials=1)
        if steps[0] > budget:
            steps[0] = before
            break
        used.append(study.trials[-1])
    done = [t for t in used if t.state == optuna.trial.TrialState.COMPLETE]
    pruned = sum(t.state == optuna.trial.TrialState.PRUNED for t in used)
    return {
        "trials": len(used),
        "pruned": pruned,
        "steps": steps[0],
        "regret": min(t.value for t in done) - curve.OPTIMUM,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--seed0", type=int, default=1, help="the first seed")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=20, help="n_warmup_steps")
    ap.add_argument("--startup", type=int, default=3, help="n_startup_trials")
    ap.add_argument("--step-seconds", type=float, default=0.01)
    ap.add_argument("--cap", type=int, default=2, help="the pruned arm's trials, times TRIALS")
    a = ap.parse_args()
    budget = a.trials * curve.STEPS
    arms = {
        "optuna TPE, no pruner": (a.trials, lambda: optuna.pruners.NopPruner()),
        "optuna TPE + MedianPruner": (
            a.cap * a.trials,
            lambda: optuna.pruners.MedianPruner(
                n_startup_trials=a.startup, n_warmup_steps=a.warmup
            ),
        ),
    }
    for name, (trials, make) in arms.items():
        runs = [run(seed, trials, make(), budget) for seed in range(a.seed0, a.seed0 + a.seeds)]
        hours = sum(r["steps"] for r in runs) * a.step_seconds / 3600.0
        print(
            json.dumps(
                {
                    "arm": name,
                    "seeds": a.seeds,
                    "experiments": sum(r["trials"] for r in runs),
                    "pruned": sum(r["pruned"] for r in runs),
                    "steps": sum(r["steps"] for r in runs),
                    "per_step_hour": sum(r["trials"] for r in runs) / hours,
                    "median_regret": statistics.median(r["regret"] for r in runs),
                }
            )
        )


main()
