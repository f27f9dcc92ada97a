"""Fixed verifier: the validation loss of a small language-model training run as a synthetic
response surface (floor 2.0). The best log10 learning rate is -3.2 at a batch of 2**7 and moves
by 0.15 per doubling of the batch (and down for wider models); too high a rate costs more than
too low, and needs warmup. Capacity is best at DEPTH * WIDTH**2 = 12 * 512**2, and a model
deeper than WIDTH / 16 is penalised. Minimum 2.0 (e.g. LEARNING_RATE=10**-3.2, WARMUP=0.06,
WEIGHT_DECAY=10**-1.5, BATCH_POW=7, DEPTH=12, WIDTH=512). Prints `score: value` (minimise)."""

import math


def loss(k):
    """The noise-free loss of knobs module (or namespace) `k`."""
    lr_opt = -3.2 + 0.15 * (k.BATCH_POW - 7) - 0.25 * math.log2(k.WIDTH / 512.0)
    d = math.log10(k.LEARNING_RATE) - lr_opt
    lr = 0.25 * d * d if d > 0 else 0.08 * d * d
    if d > 0.8:
        lr += 0.6 * (d - 0.8) ** 2
    warm = 2.0 * (k.WARMUP - 0.06) ** 2 * (1.0 + 4.0 * max(d, 0.0))
    wd = 0.02 * (math.log10(k.WEIGHT_DECAY) + 1.5) ** 2
    batch = 0.015 * (k.BATCH_POW - 7) ** 2
    size = 0.03 * math.log2(k.DEPTH * k.WIDTH**2 / (12.0 * 512.0**2)) ** 2
    shape = 0.05 * max(0.0, math.log2(16.0 * k.DEPTH / k.WIDTH)) ** 2
    return 2.0 + lr + warm + wd + batch + size + shape


if __name__ == "__main__":
    import knobs

    print("score: %.9g" % loss(knobs))
