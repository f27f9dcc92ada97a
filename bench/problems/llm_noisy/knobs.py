"""Hyperparameters of a small language-model training run, measured with noise; SEED is the
measurement's seed."""

SEED = 42                # hone: fixed
LEARNING_RATE = 0.01     # hone: log 1e-5..0.1
WARMUP = 0.0             # hone: 0.0..0.3
WEIGHT_DECAY = 0.001     # hone: log 1e-4..0.3
BATCH_POW = 5            # hone: int 4..10
DEPTH = 4                # hone: int 2..24
WIDTH = 128              # hone: int log 64..1024
