"""Fixed verifier of a problem where part of the box crashes, as a training script would:
a momentum above 0.95 diverges, a batch size that does not divide the 4096 examples is
refused, and a learning rate times batch size above 4 runs out of memory. Elsewhere a smooth
bowl with its minimum 0 at LEARNING_RATE=0.01, MOMENTUM=0.9, BATCH=64, WEIGHT_DECAY=1e-4,
close to the momentum edge. Prints `score: value`; exits non-zero in the crash region."""

import math
import sys

import knobs

if knobs.MOMENTUM > 0.95:
    sys.exit("error: momentum %g > 0.95: the loss diverged to nan" % knobs.MOMENTUM)
if 4096 % knobs.BATCH != 0:
    sys.exit("error: batch size %d does not divide the 4096 examples" % knobs.BATCH)
if knobs.LEARNING_RATE * knobs.BATCH > 4.0:
    sys.exit("error: out of memory (learning rate x batch %g > 4)"
             % (knobs.LEARNING_RATE * knobs.BATCH))

value = (
    (math.log10(knobs.LEARNING_RATE) + 2.0) ** 2 * 0.4
    + (knobs.MOMENTUM - 0.9) ** 2 * 2.0
    + (math.log2(knobs.BATCH) - 6.0) ** 2 * 0.05
    + (math.log10(knobs.WEIGHT_DECAY) + 4.0) ** 2 * 0.05
)
print("score: %.9g" % value)
