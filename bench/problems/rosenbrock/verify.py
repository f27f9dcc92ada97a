"""Fixed verifier: a 4-D Rosenbrock function whose minimum (0) is shifted to
x = (0.7, -0.4, 1.1, 0.3). Prints `score: value` (minimise)."""

import knobs

SHIFT = (0.7, -0.4, 1.1, 0.3)
# z = x - shift + 1 puts Rosenbrock's minimum (z = 1) at x = shift.
z = [x - s + 1.0 for x, s in zip((knobs.X1, knobs.X2, knobs.X3, knobs.X4), SHIFT)]
value = sum(100.0 * (z[i + 1] - z[i] ** 2) ** 2 + (1.0 - z[i]) ** 2 for i in range(3))
print("score: %.9g" % value)
