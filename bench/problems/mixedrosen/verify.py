"""Fixed verifier: a 4-D Rosenbrock valley over x = (A / 4, B / 4, C, D). OFFSET moves the
valley's minimum in C and D and adds a constant: left (+0.4, minimum at C=0.9, D=-0.6),
center (+0.1, C=-0.5, D=1.2), right (+0, C=1.4, D=0.2); A=2, B=-1 in all. Minimum 0 at
OFFSET="right". Prints `score: value` (minimise)."""

import knobs

OFFSETS = {"left": (0.9, -0.6, 0.4), "center": (-0.5, 1.2, 0.1), "right": (1.4, 0.2, 0.0)}
c_opt, d_opt, extra = OFFSETS[knobs.OFFSET]
shift = (0.5, -0.25, c_opt, d_opt)
x = (knobs.A / 4.0, knobs.B / 4.0, knobs.C, knobs.D)
z = [xi - s + 1.0 for xi, s in zip(x, shift)]
value = extra + sum(100.0 * (z[i + 1] - z[i] ** 2) ** 2 + (1.0 - z[i]) ** 2 for i in range(3))
print("score: %.9g" % value)
