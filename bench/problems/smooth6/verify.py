"""Fixed verifier: the 6-D Levy function (smooth, with a ripple of many local minima) whose
global minimum (0) is shifted to x = (1.3, -2.1, 0.4, 2.7, -0.9, 1.8). Prints `score: value`
(minimise)."""

import math

import knobs

SHIFT = (1.3, -2.1, 0.4, 2.7, -0.9, 1.8)
x = (knobs.X1, knobs.X2, knobs.X3, knobs.X4, knobs.X5, knobs.X6)
# w = 1 at the optimum: Levy's minimum lies at x_levy = 1, and w = 1 + (x_levy - 1) / 4.
w = [1.0 + (xi - s) / 4.0 for xi, s in zip(x, SHIFT)]
value = math.sin(math.pi * w[0]) ** 2
for wi in w[:-1]:
    value += (wi - 1.0) ** 2 * (1.0 + 10.0 * math.sin(math.pi * wi + 1.0) ** 2)
value += (w[-1] - 1.0) ** 2 * (1.0 + math.sin(2.0 * math.pi * w[-1]) ** 2)
print("score: %.9g" % value)
