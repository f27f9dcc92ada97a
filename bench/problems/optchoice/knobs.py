"""A categorical optimizer choice decides which of the other knobs matter."""

OPTIMIZER = "sgd"        # hone: choice ["sgd", "adam", "lion"]
LEARNING_RATE = 0.01     # hone: log 1e-5..1.0
MOMENTUM = 0.5           # hone: 0.0..0.99
BETA2 = 0.9              # hone: 0.9..0.9999
WEIGHT_DECAY = 0.001     # hone: log 1e-5..1.0
