"""A synthetic learning curve shared by the pruning benchmark's verifier (train.py) and its
Optuna comparison (bench/prune_optuna.py): a configuration's loss falls from about 4 towards
its final value, fast or slow with the learning rate, with a little seeded noise per step.
The final value is smallest (1.0) at LR=10**-2.5, WIDTH=128, DECAY=0.3."""

import math
import random
import zlib

STEPS = 50
OPTIMUM = 1.0


def final(lr, width, decay):
    """The loss the configuration converges to."""
    return (
        OPTIMUM
        + 0.3 * (math.log10(lr) + 2.5) ** 2
        + 0.05 * (math.log2(width) - 7.0) ** 2
        + (decay - 0.3) ** 2
    )


def loss(lr, width, decay, step, key=""):
    """The loss printed at `step` (1..STEPS); the curves of two configurations may cross."""
    tau = 5.0 + 5.0 / (1.0 + 100.0 * lr)
    clean = final(lr, width, decay) + 3.0 * math.exp(-step / tau)
    if step == STEPS:
        return clean
    noise = random.Random(zlib.crc32(("%s/%d" % (key, step)).encode())).gauss(0.0, 0.02)
    return clean + noise
