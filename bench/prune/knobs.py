"""Knobs of the synthetic training run (bench/prune)."""

LR = 0.1           # hone: log 0.0001..1.0
WIDTH = 16         # hone: int 8..512
DECAY = 0.9        # hone: 0.0..1.0
