"""Fixed verifier: MODEL picks which knobs matter. linear (floor 0.6):
REGULARIZATION; tree (floor 0.3): TREE_DEPTH; net (floor 0): NET_LR and
NET_WIDTH, with a narrow optimum at NET_LR=10**-2.5, NET_WIDTH=64.
Prints `score: value` (minimise)."""

import math

import knobs

if knobs.MODEL == "linear":
    value = 0.6 + (math.log10(knobs.REGULARIZATION) + 3.0) ** 2 * 0.05
elif knobs.MODEL == "tree":
    value = 0.3 + (knobs.TREE_DEPTH - 9) ** 2 * 0.01
else:
    value = (
        (math.log10(knobs.NET_LR) + 2.5) ** 2 * 0.6
        + (math.log2(knobs.NET_WIDTH) - 6.0) ** 2 * 0.08
    )
print("score: %.9g" % value)
