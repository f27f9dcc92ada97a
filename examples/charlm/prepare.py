"""Fixed evaluator for the charlm example. Do not edit: hone protects this file.

It owns the data and the metric:

* the corpus is data/corpus.txt, read as bytes;
* the last VAL_FRACTION of its bytes is the validation split, everything
  before is the training split (pinned, deterministic);
* evaluate_bpb(model) returns validation bits per byte (lower is better).

A model is any object with

    model.prob(context, byte) -> float
        probability that the next byte is `byte` (an int 0..255), given
        `context`, the CONTEXT_BYTES bytes that precede it (fewer at the very
        start of the corpus). The 256 values for one context must sum to 1.

    model.update(context, byte) -> None        (optional)
        called after `byte` has been scored, so the model may learn from
        validation text it has already paid for (dynamic evaluation, as a
        compressor would). It never sees a byte before it is scored.

The evaluator checks the full distribution (all 256 bytes) at NORM_CHECKS
positions spread over the validation split and stops with an error if it is
not normalised, and clips every probability to PROB_FLOOR so the result is
always finite.
"""

import math
import os
import sys

DATA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "corpus.txt")
VAL_FRACTION = 0.10      # the last 10% of the corpus is validation
CONTEXT_BYTES = 64       # how much preceding text a model is shown
PROB_FLOOR = 1e-9        # probabilities are clipped to this (about 30 bits)
NORM_CHECKS = 64         # positions where the whole distribution is checked
NORM_TOLERANCE = 1e-6    # allowed |sum(p) - 1| at those positions


def load_corpus():
    """The whole corpus as bytes."""
    with open(DATA_PATH, "rb") as f:
        return f.read()


def split_point(data):
    """Index of the first validation byte."""
    return len(data) - int(len(data) * VAL_FRACTION)


def load_splits():
    """(train, val) bytes; the split is fixed."""
    data = load_corpus()
    cut = split_point(data)
    return data[:cut], data[cut:]


def _check_distribution(model, context, position):
    probs = []
    for x in range(256):
        p = float(model.prob(context, x))
        if not (0.0 <= p <= 1.0):
            raise ValueError("model.prob returned %r for byte %d at position %d; "
                             "probabilities must lie in [0, 1]" % (p, x, position))
        probs.append(p)
    total = math.fsum(probs)
    if abs(total - 1.0) > NORM_TOLERANCE:
        raise ValueError("model's distribution at position %d sums to %.9f, not 1; "
                         "prob(context, x) over all 256 bytes must sum to 1" % (position, total))
    return probs


def evaluate_bpb(model):
    """Validation bits per byte of `model` (see the module docstring)."""
    data = load_corpus()
    start = split_point(data)
    n_val = len(data) - start
    if n_val <= 0:
        raise ValueError("validation split is empty")
    checks = set(start + (j * n_val) // NORM_CHECKS + (j * 7919) % 97 for j in range(NORM_CHECKS))
    prob = model.prob
    update = getattr(model, "update", None)
    floor = PROB_FLOOR
    log = math.log
    nats = 0.0
    for i in range(start, len(data)):
        context = data[max(0, i - CONTEXT_BYTES):i]
        b = data[i]
        if i in checks:
            p = _check_distribution(model, context, i)[b]
        else:
            p = prob(context, b)
            if p > 1.0 + NORM_TOLERANCE:
                raise ValueError("model.prob returned %r > 1 at position %d" % (p, i))
        if not p > floor:  # also catches NaN
            p = floor
        nats -= log(p)
        if update is not None:
            update(context, b)
    return nats / (n_val * math.log(2.0))


if __name__ == "__main__":
    train, val = load_splits()
    print("corpus: %s" % DATA_PATH)
    print("train_bytes: %d" % len(train))
    print("val_bytes: %d" % len(val))

    class Uniform:
        def prob(self, context, byte):
            return 1.0 / 256.0

    print("uniform_val_bpb: %.6f" % evaluate_bpb(Uniform()))
    sys.exit(0)
