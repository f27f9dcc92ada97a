"""Fixed verifier: only K03 and K07 matter, with an interaction (the best K03 moves with K07);
the other eight knobs have no effect. Minimum 0 at K07=10**0.6, K03=0.82.
Prints `score: value` (minimise)."""

import math

import knobs

u = math.log10(knobs.K07)
value = 0.3 * (u - 0.6) ** 2 + 2.0 * (knobs.K03 - 0.7 - 0.2 * u) ** 2
print("score: %.9g" % value)
