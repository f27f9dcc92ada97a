"""Byte-level n-gram language model; the file hone's loop may edit.

An interpolated n-gram model over byte contexts of length 0..ORDER:

    p_k(b | c) = (count(c b) - D(count)) / total(c) + gamma(c) * p_{k-1}(b | c[1:])

with absolute discounting, Kneser-Ney (lower orders use continuation counts)
or Witten-Bell smoothing, down to a uniform distribution over the 256 byte
values. Contexts seen fewer than MIN_COUNT times are skipped (pruned). With
ADAPT_WEIGHT > 0 the counts keep growing on validation text that has already
been scored (dynamic evaluation).

Run: python3 train.py  (prints val_bpb and secondary metrics)
"""

import sys
import time
from collections import Counter
from operator import itemgetter

sys.dont_write_bytecode = True  # leave no __pycache__ behind in the checkout
import prepare  # noqa: E402  (the fixed evaluator)

# ---- knobs (hone's built-in optimizer edits these literals) ----------------
ORDER = 3                 # hone: int 1..8
SMOOTHING = "absolute"    # hone: choice ["absolute", "kneser_ney", "witten_bell"]
DISCOUNT = 0.5            # hone: 0.05..0.99
DISCOUNT_MANY = 0.5       # hone: 0.05..1.95
MIN_COUNT = 2             # hone: int 1..16
TRAIN_BYTES = 150000      # hone: int log 10000..510000
ADAPT_WEIGHT = 0          # hone: int 0..12
# -----------------------------------------------------------------------------

SINGLE = [bytes([x]) for x in range(256)]
PREFIX = itemgetter(slice(None, -1))   # the context of an n-gram
SUFFIX = itemgetter(slice(1, None))    # an n-gram without its first byte
MIDDLE = itemgetter(slice(1, -1))      # both


class NGramModel:
    """Counts per order k (context length k):

    table[k]  n-gram (k+1 bytes) -> count (raw, or continuation count for
              Kneser-Ney below the top order)
    total[k]  context (k bytes)  -> sum of its counts
    kinds[k]  context            -> number of distinct next bytes
    ones[k]   context            -> number of next bytes whose count is 1
    """

    def __init__(self, order, smoothing, discount, discount_many, min_count, adapt_weight):
        if smoothing not in ("absolute", "kneser_ney", "witten_bell"):
            raise ValueError("unknown SMOOTHING %r" % (smoothing,))
        self.order = order
        self.smoothing = smoothing
        self.witten_bell = smoothing == "witten_bell"
        self.kneser_ney = smoothing == "kneser_ney"
        self.d1 = discount
        self.d2 = discount_many
        self.min_count = min_count
        self.adapt_weight = adapt_weight
        self.table = []
        self.total = []
        self.kinds = []
        self.ones = []

    # -- training ------------------------------------------------------------
    def fit(self, data):
        n = len(data)
        get = data.__getitem__
        raw = [Counter(map(get, map(slice, range(0, n - k), range(k + 1, n + 1))))
               for k in range(self.order + 1)]
        for k in range(self.order + 1):
            if self.kneser_ney and k < self.order:
                # continuation counts: in how many distinct left contexts does
                # the n-gram occur
                table = Counter(map(SUFFIX, raw[k + 1]))
                total = Counter(map(MIDDLE, raw[k + 1]))
            else:
                table = raw[k]
                total = Counter(map(get, map(slice, range(0, n - k), range(k, n))))
            self.table.append(table)
            self.total.append(total)
            self.kinds.append(Counter(map(PREFIX, table)))
            self.ones.append(Counter([g[:-1] for g, c in table.items() if c == 1]))
        return self

    def num_contexts(self):
        m = self.min_count
        return sum(1 for t in self.total for v in t.values() if v >= m)

    # -- prediction ----------------------------------------------------------
    def prob(self, context, byte):
        p = 1.0 / 256.0
        nb = SINGLE[byte]
        n = len(context)
        m = self.min_count
        wb = self.witten_bell
        d1 = self.d1
        d2 = self.d2
        for k in range(min(self.order, n) + 1):
            c = context[n - k:] if k else b""
            t = self.total[k].get(c, 0)
            if t < m or t == 0:
                break
            cnt = self.table[k].get(c + nb, 0)
            kinds = self.kinds[k][c]
            if wb:
                p = (cnt + kinds * p) / (t + kinds)
            else:
                ones = self.ones[k].get(c, 0)
                gamma = d1 * ones + d2 * (kinds - ones)
                if cnt == 0:
                    p = gamma * p / t
                else:
                    p = (cnt - (d1 if cnt == 1 else d2) + gamma * p) / t
        return p

    # -- dynamic evaluation --------------------------------------------------
    def _add(self, k, c, g, w):
        """Add w to table[k][g] (g = c + next byte); True if g was new."""
        table = self.table[k]
        old = table.get(g, 0)
        table[g] = old + w
        self.total[k][c] += w
        if old == 0:
            self.kinds[k][c] += 1
            if w == 1:
                self.ones[k][c] += 1
        elif old == 1:
            self.ones[k][c] -= 1
        return old == 0

    def update(self, context, byte):
        w = self.adapt_weight
        if w <= 0:
            return
        nb = SINGLE[byte]
        n = len(context)
        top = min(self.order, n)
        if self.kneser_ney:
            # raw counts at the top order; a new n-gram there is a new left
            # context for its suffix one order down, and so on
            k = top
            new = self._add(k, context[n - k:] if k else b"", context[n - k:] + nb, w)
            if k < self.order:
                return  # start of corpus: no top-order context, keep it simple
            while new and k > 0:
                k -= 1
                c = context[n - k:] if k else b""
                new = self._add(k, c, c + nb, 1)
        else:
            for k in range(top + 1):
                c = context[n - k:] if k else b""
                self._add(k, c, c + nb, w)


def main():
    train, _ = prepare.load_splits()
    data = train[:TRAIN_BYTES]
    t0 = time.perf_counter()
    model = NGramModel(ORDER, SMOOTHING, DISCOUNT, DISCOUNT_MANY, MIN_COUNT, ADAPT_WEIGHT).fit(data)
    train_seconds = time.perf_counter() - t0
    contexts = model.num_contexts()
    t1 = time.perf_counter()
    bpb = prepare.evaluate_bpb(model)
    eval_seconds = time.perf_counter() - t1
    print("val_bpb: %.6f" % bpb)
    print("train_seconds: %.2f" % train_seconds)
    print("eval_seconds: %.2f" % eval_seconds)
    print("num_contexts: %d" % contexts)
    print("train_bytes: %d" % len(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
