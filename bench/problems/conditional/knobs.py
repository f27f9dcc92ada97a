"""A categorical switch decides which of the other knobs matter."""

MODEL = "linear"         # hone: choice ["linear", "tree", "net"]
REGULARIZATION = 0.1     # hone: log 1e-5..10.0
TREE_DEPTH = 3           # hone: int 1..20
NET_LR = 0.1             # hone: log 1e-5..1.0
NET_WIDTH = 16           # hone: int log 4..1024
