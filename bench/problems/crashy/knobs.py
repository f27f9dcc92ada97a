"""Knobs of a training run that crashes outside what the program accepts."""

LEARNING_RATE = 0.001   # hone: log 1e-4..1.0
MOMENTUM = 0.5          # hone: 0.0..0.999
BATCH = 32              # hone: choice [16, 32, 48, 64, 96, 128, 192, 256]
WEIGHT_DECAY = 0.001    # hone: log 1e-6..0.1
