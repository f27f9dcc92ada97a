"""Fixed verifier: a mixed integer/categorical objective with interactions.
Minimum 0 at LAYERS=5, WIDTH=128, ACTIVATION="gelu", LEARNING_RATE=10**-2.5,
USE_NORM=True. Prints `score: value` (minimise)."""

import math

import knobs

ACT = {"relu": 0.25, "tanh": 0.6, "gelu": 0.0, "swish": 0.1}
depth = (knobs.LAYERS - 5) ** 2 * 0.06
width = (math.log2(knobs.WIDTH) - 7.0) ** 2 * 0.12
# Without normalisation the best learning rate is ten times smaller and costs 0.3.
lr_opt = -2.5 if knobs.USE_NORM else -3.5
lr = (math.log10(knobs.LEARNING_RATE) - lr_opt) ** 2 * 0.3
norm = 0.0 if knobs.USE_NORM else 0.3
value = depth + width + ACT[knobs.ACTIVATION] + lr + norm
print("score: %.9g" % value)
