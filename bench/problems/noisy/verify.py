"""Fixed verifier: a smooth objective (minimum 0 at ALPHA=0.65, BETA=10,
GAMMA=12) plus Gaussian measurement noise (sd 0.05). The noise is seeded by
SEED, the run, the experiment and the repeat, so every measurement differs
and a rerun of the same run reproduces it. Prints `score` (noisy; what the
loop optimises) and `true_score` (noise-free; what the benchmark scores)."""

import math
import os
import random
import zlib

import knobs

true = (
    (knobs.ALPHA - 0.65) ** 2 * 2.0
    + (math.log10(knobs.BETA) - 1.0) ** 2 * 0.5
    + (math.log2(knobs.GAMMA) - math.log2(12)) ** 2 * 0.05
)
key = "%s/%s/%s/%s" % (
    knobs.SEED,
    os.environ.get("HONE_RUN", ""),
    os.environ.get("HONE_EXPERIMENT", ""),
    os.environ.get("HONE_REPEAT", ""),
)
noise = random.Random(zlib.crc32(key.encode())).gauss(0.0, 0.05)
print("score: %.9g" % (true + noise))
print("true_score: %.9g" % true)
