"""A held-out-like copy of the sampler suite: bench/problems copied to OUT/bench/problems with
every numeric knob's range widened on one side, by a half to a whole of its width (of its
decades for a log range), the side and the amount drawn from SALT, the problem and the knob.
A range from zero or above grows upwards only, and a fraction just under 1 (a beta, a
momentum) is left alone, so every value stays one the verifier takes. The verifiers, optima
and baselines are unchanged, so regret reads the same; what moves is where the optimum and
the baseline sit in the box (no longer near its centre, where the suite's mostly are).

    python3 bench/widen_problems.py bench/problems OUT SALT
    cd OUT && OUT=hone.txt PROBLEMS=... <repo>/target/release/examples/tune_sampler 30
    bench/optuna.sh --manifest OUT/bench/problems/manifest.toml --samplers tpe --in-process ...
"""
import math, os, random, re, shutil, sys
src, out, salt = sys.argv[1], sys.argv[2], sys.argv[3]
dst = os.path.join(out, "bench", "problems")
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
pat = re.compile(r"^(\w+)(\s*=\s*\S+\s*#\s*hone:\s*)(int )?(log )?(-?[\d.e+-]+)\.\.(-?[\d.e+-]+)\s*$")
def fmt(x, is_int):
    return str(int(round(x))) if is_int else repr(float("%.4g" % x))
for prob in sorted(os.listdir(dst)):
    p = os.path.join(dst, prob, "knobs.py")
    if not os.path.exists(p):
        continue
    lines = open(p).read().split("\n")
    for i, line in enumerate(lines):
        m = pat.match(line)
        if not m:
            continue
        name, mid, is_int, is_log, lo, hi = m.groups()
        lo, hi = float(lo), float(hi)
        rng = random.Random("%s/%s/%s" % (salt, prob, name))
        f = rng.uniform(0.5, 1.0)
        up = rng.random() < 0.5
        if is_log:
            dec = math.log10(hi / lo) * f
            lo, hi = (lo, hi * 10 ** dec) if up else (lo / 10 ** dec, hi)
            if is_int:
                lo = max(1.0, math.floor(lo))
        else:
            w = (hi - lo) * f
            if 0.9 < hi < 1.0:
                continue  # a fraction next to 1 (a beta, a momentum): left as it is
            if lo >= 0:
                up = True  # nothing below zero
            lo, hi = (lo, hi + w) if up else (lo - w, hi)
        lines[i] = "%s%s%s%s%s..%s" % (name, mid, is_int or "", is_log or "", fmt(lo, is_int), fmt(hi, is_int))
    open(p, "w").write("\n".join(lines))
