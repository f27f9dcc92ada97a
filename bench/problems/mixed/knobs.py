"""Mixed integer, categorical, boolean and log-scale float knobs."""

LAYERS = 2               # hone: int 1..12
WIDTH = 16               # hone: int log 8..512
ACTIVATION = "tanh"      # hone: choice ["relu", "tanh", "gelu", "swish"]
LEARNING_RATE = 0.1      # hone: log 1e-4..1.0
USE_NORM = False         # hone: bool
