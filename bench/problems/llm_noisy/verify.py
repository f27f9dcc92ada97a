"""Fixed verifier: the `llm` problem's loss surface (llm_surface.py, a copy of llm/verify.py)
plus Gaussian measurement noise (sd 0.05), seeded by SEED, the run, the experiment and the
repeat as in `noisy`. Prints `score` (noisy; what the loop optimises) and `true_score`
(noise-free; what the benchmark scores)."""

import os
import random
import zlib

import knobs
import llm_surface

true = llm_surface.loss(knobs)
key = "%s/%s/%s/%s" % (
    knobs.SEED,
    os.environ.get("HONE_RUN", ""),
    os.environ.get("HONE_EXPERIMENT", ""),
    os.environ.get("HONE_REPEAT", ""),
)
noise = random.Random(zlib.crc32(key.encode())).gauss(0.0, 0.05)
print("score: %.9g" % (true + noise))
print("true_score: %.9g" % true)
