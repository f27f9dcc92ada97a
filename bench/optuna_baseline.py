"""Optuna baselines for `hone bench`: TPE, CMA-ES, GP and random search on the same problems,
with the same budgets and seeds, writing a runs.json that `hone bench --with FILE` reports
side by side with hone's arms.

Every trial does what one hone experiment does: the problem's knobs are written into a copy
of its editable file, the problem's own verifier command runs as a process, and its metric
lines are parsed. With --in-process (for verifiers run as `python3 ... verify.py`, i.e. every
synthetic problem), the verifier's code runs in this process instead: a `knobs` module holding
the trial's values is put in sys.modules, the HONE_* variables are set as for the process, and
the printed metric lines are parsed the same way. The values are those the process would read
back from the written file (repr round-trips a float exactly), so the figures are identical;
only the process start per trial is saved. The first trial is the baseline configuration (enqueued), as hone's
experiment 0 is. The incumbent after each trial is the trial with the best measured
objective so far; its score (the noise-free `score` metric where the manifest names one)
makes the trajectory, exactly as for hone's runs.

Run through bench/optuna.sh, which makes the virtual environment.
"""

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import types

import optuna

KNOB = re.compile(
    r"^([A-Z][A-Z0-9_]*)\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s#]+)\s*#\s*hone:\s*(.*?)\s*$"
)
METRIC = re.compile(r"^\s*([A-Za-z_][\w.\-/]*)\s*[:=]\s*([-+0-9.eEinfINFaA]+)\s*$")


def literal(text):
    if text in ("True", "true"):
        return True
    if text in ("False", "false"):
        return False
    if text[0] in "\"'":
        return text[1:-1]
    try:
        return int(text.replace("_", ""))
    except ValueError:
        return float(text)


def parse_knobs(text):
    """(name, kind, args, default) for every annotated knob; `fixed` ones are left out."""
    knobs = []
    for line in text.splitlines():
        m = KNOB.match(line)
        if not m:
            continue
        name, value, ann = m.group(1), literal(m.group(2)), m.group(3)
        words = ann.split()
        if ann == "fixed" or "SEED" in name:
            continue
        if ann == "bool":
            knobs.append((name, "bool", None, value))
        elif ann.startswith("choice"):
            items = json.loads(ann[len("choice"):].strip().replace("'", '"'))
            knobs.append((name, "choice", items, value))
        else:
            is_int = words[0] == "int"
            if is_int:
                words = words[1:]
            log = words[0] == "log"
            if log:
                words = words[1:]
            lo, hi = words[0].split("..")
            cast = int if is_int else float
            knobs.append((name, "int" if is_int else "float", (cast(lo), cast(hi), log), value))
    return knobs


def render(value):
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):
        return '"%s"' % value
    return repr(value)


def write_knobs(path, text, config):
    out = []
    for line in text.splitlines(keepends=True):
        m = KNOB.match(line.rstrip("\n"))
        if m and m.group(1) in config:
            start, end = m.span(2)
            line = line[:start] + render(config[m.group(1)]) + line[end:]
        out.append(line)
    with open(path, "w") as f:
        f.write("".join(out))


def measure(workdir, command, env):
    proc = subprocess.run(
        command, shell=True, cwd=workdir, env=env, capture_output=True, text=True, timeout=600
    )
    return proc.returncode, parse_metrics(proc.stdout)


def parse_metrics(stdout):
    metrics = {}
    for line in stdout.splitlines():
        m = METRIC.match(line)
        if m:
            try:
                metrics[m.group(1)] = float(m.group(2))
            except ValueError:
                pass
    return metrics


class InProcess:
    """The verifier `python3 [flags] verify.py` of `workdir`, run in this process."""

    def __init__(self, workdir, command, text):
        script = command.split()[-1]
        path = os.path.join(workdir, script)
        with open(path) as f:
            self.code = compile(f.read(), path, "exec")
        self.workdir = workdir
        # Every knob of the file, fixed ones included (a verifier may read SEED).
        self.defaults = {m.group(1): literal(m.group(2))
                         for m in map(KNOB.match, text.splitlines()) if m}

    def __call__(self, config, env):
        module = types.ModuleType("knobs")
        module.__dict__.update(self.defaults)
        module.__dict__.update(config)
        saved_path, saved_env = list(sys.path), dict(os.environ)
        sys.modules["knobs"] = module
        sys.path.insert(0, self.workdir)
        os.environ.update(env)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(self.code, {"__name__": "__main__", "__file__": "verify.py"})
            rc = 0
        except Exception:
            rc = 1
        finally:
            sys.modules.pop("knobs", None)
            sys.path[:] = saved_path
            os.environ.clear()
            os.environ.update(saved_env)
        return rc, parse_metrics(out.getvalue())


def make_sampler(name, seed):
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    return optuna.samplers.RandomSampler(seed=seed)


SAMPLER_CLASS = {"tpe": "TPESampler", "cmaes": "CmaEsSampler", "gp": "GPSampler",
                 "random": "RandomSampler"}


def run_one(problem, spec, sampler_name, seed, budget, scratch, in_process=False):
    editable = spec["loop"]["editable"][0]
    command = spec["verify"]["command"]
    metric = spec["verify"]["metric"]
    minimize = spec["verify"].get("direction", "minimize") == "minimize"
    score_name = problem.get("score")
    workdir = os.path.join(scratch, "%s-%s-%d" % (problem["name"], sampler_name, seed))
    shutil.copytree(problem["path"], workdir, ignore=shutil.ignore_patterns(".hone", "__pycache__"))
    knobs_path = os.path.join(workdir, editable)
    with open(knobs_path) as f:
        text = f.read()
    knobs = parse_knobs(text)
    sampler = make_sampler(sampler_name, seed)
    inline = None
    if in_process and re.fullmatch(r"python3?( -\w+)* [\w.]+\.py", command.strip()):
        inline = InProcess(workdir, command, text)
    study = optuna.create_study(direction="minimize" if minimize else "maximize", sampler=sampler)
    study.enqueue_trial({name: default for name, _, _, default in knobs})
    env = dict(os.environ, HONE_RUN="bench-s%d" % seed, HONE_REPEAT="0", PYTHONDONTWRITEBYTECODE="1")
    incumbent = None  # (objective, score)
    trajectory = []
    started = time.time()
    for i in range(budget):
        trial = study.ask()
        config = {}
        for name, kind, args, _ in knobs:
            if kind == "bool":
                config[name] = trial.suggest_categorical(name, [False, True])
            elif kind == "choice":
                config[name] = trial.suggest_categorical(name, args)
            elif kind == "int":
                config[name] = trial.suggest_int(name, args[0], args[1], log=args[2])
            else:
                config[name] = trial.suggest_float(name, args[0], args[1], log=args[2])
        env["HONE_EXPERIMENT"] = str(i)
        if inline is not None:
            rc, metrics = inline(config, {k: v for k, v in env.items() if k.startswith("HONE_")})
        else:
            write_knobs(knobs_path, text, config)
            rc, metrics = measure(workdir, command, env)
        value = metrics.get(metric)
        if rc != 0 or value is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, value)
            score = metrics.get(score_name, value) if score_name else value
            better = incumbent is None or (value < incumbent[0] if minimize else value > incumbent[0])
            if better:
                incumbent = (value, score)
        if incumbent is not None:
            trajectory.append(incumbent[1])
    shutil.rmtree(workdir, ignore_errors=True)
    name = SAMPLER_CLASS[sampler_name]
    return {
        "problem": problem["name"],
        "arm": "optuna-" + sampler_name,
        "seed": seed,
        "budget": budget,
        "trajectory": trajectory,
        "unverified": 0,
        "wall_s": time.time() - started,
        "source": "optuna %s %s(seed) with defaults; baseline enqueued first" % (optuna.__version__, name),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--manifest", default=os.path.join(here, "problems", "manifest.toml"))
    ap.add_argument("--problems", default="", help="comma-separated (default: all)")
    ap.add_argument("--samplers", default="tpe,random", help="of tpe, cmaes, gp, random")
    ap.add_argument("--in-process", action="store_true",
                    help="run python verifiers in this process (same figures, no process per trial)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--seed0", type=int, default=1,
                    help="the first seed (seeds SEED0 .. SEED0+REPEATS-1), e.g. 1000 for the held-out seeds")
    ap.add_argument("--budget", default="20,50,100", help="the largest is what a run gets")
    ap.add_argument("--out", default=os.path.join(here, "out", "optuna-runs.json"))
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with open(args.manifest, "rb") as f:
        manifest = tomllib.load(f)
    base = os.path.dirname(os.path.abspath(args.manifest))
    wanted = [p for p in args.problems.split(",") if p]
    max_budget = max(int(b) for b in args.budget.split(","))
    runs = []
    if os.path.exists(args.out):
        with open(args.out) as f:
            runs = json.load(f)["runs"]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="hone-optuna-")
    try:
        for problem in manifest["problem"]:
            if wanted and problem["name"] not in wanted:
                continue
            problem["path"] = os.path.normpath(os.path.join(base, problem["dir"]))
            with open(os.path.join(problem["path"], "hone.toml"), "rb") as f:
                spec = tomllib.load(f)
            budget = min(problem.get("budget", max_budget), max_budget)
            for sampler in args.samplers.split(","):
                for seed in range(args.seed0, args.seed0 + args.repeats):
                    arm = "optuna-" + sampler
                    # A longer run of the same seed holds this one as its prefix.
                    if any(r["problem"] == problem["name"] and r["arm"] == arm and r["seed"] == seed
                           and r["budget"] >= budget for r in runs):
                        continue
                    run = run_one(problem, spec, sampler, seed, budget, scratch, args.in_process)
                    runs.append(run)
                    print("%s %s seed %d: best %.6g after %d (%.1fs)" % (
                        problem["name"], arm, seed, run["trajectory"][-1], len(run["trajectory"]),
                        run["wall_s"]), file=sys.stderr)
                    tmp = args.out + ".tmp"
                    with open(tmp, "w") as f:
                        json.dump({"runs": runs}, f, indent=1)
                    os.replace(tmp, args.out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
