"""Fixed verifier: a smooth objective (minimum 0 at ALPHA=0.65, BETA=10,
GAMMA=12) plus Gaussian measurement noise (sd 0.05, noise.py). The noise is
seeded by SEED, the run, the experiment and the repeat, so every measurement
differs and a rerun of the same run reproduces it. Prints `score` (noisy; what
the loop optimises) and `true_score` (noise-free; what the benchmark scores)."""

import math

import knobs
import noise

true = (
    (knobs.ALPHA - 0.65) ** 2 * 2.0
    + (math.log10(knobs.BETA) - 1.0) ** 2 * 0.5
    + (math.log2(knobs.GAMMA) - math.log2(12)) ** 2 * 0.05
)
noise.report(true, knobs.SEED)
