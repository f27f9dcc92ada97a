"""Fixed verifier of the pruning benchmark: a training loop that prints its loss every step
(`step=K loss=V`, flushed at once, as a real script must for hone to see it live) and
sleeps STEP_SECONDS per step (default 0.01) to stand for the work; at the end it prints
`val_loss`, the objective."""

import os
import sys
import time

import curve
import knobs

dt = float(os.environ.get("STEP_SECONDS", "0.01"))
key = "%s/%s" % (os.environ.get("HONE_RUN", ""), os.environ.get("HONE_EXPERIMENT", ""))
for step in range(1, curve.STEPS + 1):
    time.sleep(dt)
    v = curve.loss(knobs.LR, knobs.WIDTH, knobs.DECAY, step, key)
    sys.stdout.write("step=%d loss=%.6f\n" % (step, v))
    sys.stdout.flush()
print("val_loss: %.9g" % curve.final(knobs.LR, knobs.WIDTH, knobs.DECAY))
