"""A smooth 3-D objective measured with noise; SEED is the measurement's seed."""

SEED = 42          # hone: fixed
ALPHA = 0.2        # hone: 0.0..1.0
BETA = 3.0         # hone: log 0.1..100.0
GAMMA = 8          # hone: int 1..32
