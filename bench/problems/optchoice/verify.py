"""Fixed verifier: OPTIMIZER decides which knobs matter and where the best LEARNING_RATE lies.
sgd (floor 0.3): LEARNING_RATE (best 0.1) and MOMENTUM (best 0.9); adam (floor 0.1):
LEARNING_RATE (best 10**-3.3) and BETA2 (best 0.99, on a log scale of 1 - BETA2); lion
(floor 0): LEARNING_RATE (best 10**-4) and WEIGHT_DECAY (best 0.3), narrow in both.
Prints `score: value` (minimise)."""

import math

import knobs

lr = math.log10(knobs.LEARNING_RATE)
if knobs.OPTIMIZER == "sgd":
    value = 0.3 + 0.1 * (lr + 1.0) ** 2 + 1.0 * (knobs.MOMENTUM - 0.9) ** 2
elif knobs.OPTIMIZER == "adam":
    value = 0.1 + 0.1 * (lr + 3.3) ** 2 + 0.1 * (math.log10(1.0 - knobs.BETA2) + 2.0) ** 2
else:
    value = 0.4 * (lr + 4.0) ** 2 + 0.3 * (math.log10(knobs.WEIGHT_DECAY) + 0.5) ** 2
print("score: %.9g" % value)
