"""A shifted 4-D Rosenbrock valley: the knobs the loop may edit."""

X1 = 0.0   # hone: -2.0..2.0
X2 = 0.0   # hone: -2.0..2.0
X3 = 0.0   # hone: -2.0..2.0
X4 = 0.0   # hone: -2.0..2.0
