"""A Rosenbrock valley over integer and float knobs, with a categorical offset."""

A = 0                    # hone: int -8..8
B = 0                    # hone: int -8..8
C = 0.0                  # hone: -2.0..2.0
D = 0.0                  # hone: -2.0..2.0
OFFSET = "left"          # hone: choice ["left", "center", "right"]
