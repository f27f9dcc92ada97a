"""Gaussian measurement noise (sd 0.05) for the noisy problems (`noisy`, `llm_noisy`, which link
to this file: `hone bench` copies a problem's directory, links followed, into each run's
repository). The noise is seeded by SEED, the run, the experiment and the repeat, so every
measurement differs and a rerun of the same run reproduces it."""

import os
import random
import zlib


def report(true, seed):
    """Prints `score` (`true` plus the noise; what the loop optimises) and `true_score` (the
    noise-free `true`; what the benchmark scores)."""
    key = "%s/%s/%s/%s" % (
        seed,
        os.environ.get("HONE_RUN", ""),
        os.environ.get("HONE_EXPERIMENT", ""),
        os.environ.get("HONE_REPEAT", ""),
    )
    noise = random.Random(zlib.crc32(key.encode())).gauss(0.0, 0.05)
    print("score: %.9g" % (true + noise))
    print("true_score: %.9g" % true)
