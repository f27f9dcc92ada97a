"""Fixed verifier: the `llm` problem's loss surface (llm_surface.py, a link to llm/verify.py)
plus Gaussian measurement noise (sd 0.05, noise.py), seeded by SEED, the run, the experiment
and the repeat as in `noisy`. Prints `score` (noisy; what the loop optimises) and `true_score`
(noise-free; what the benchmark scores)."""

import knobs
import llm_surface
import noise

noise.report(llm_surface.loss(knobs), knobs.SEED)
