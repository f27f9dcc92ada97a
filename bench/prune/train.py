"""Fixed verifier of the pruning benchmark: a training loop that prints its loss every step
(`step=K loss=V`, flushed at once, as a real script must for hone to see it live) and
sleeps STEP_SECONDS per step (default 0.01) to stand for the work; at the end it prints
`val_loss`, the objective. CURVE_SEED (default 0) and the experiment's number (hone's
HONE_EXPERIMENT) key the curve's noise; values are printed exactly (`repr`), so that the loop
reads the very numbers the simulation (`examples/prune_sim.rs`) computes."""

import os
import sys
import time

import curve
import knobs

dt = float(os.environ.get("STEP_SECONDS", "0.01"))
key = curve.key(int(os.environ.get("CURVE_SEED", "0")), int(os.environ.get("HONE_EXPERIMENT", "0")))
for step in range(1, curve.STEPS + 1):
    time.sleep(dt)
    v = curve.loss(knobs.LR, knobs.WIDTH, knobs.DECAY, step, key)
    sys.stdout.write("step=%d loss=%r\n" % (step, v))
    sys.stdout.flush()
print("val_loss: %r" % curve.final(knobs.LR, knobs.WIDTH, knobs.DECAY))
