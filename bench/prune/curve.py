"""A synthetic learning curve shared by the pruning benchmark's verifier (train.py) and its
Optuna comparison (bench/prune_optuna.py): a configuration's loss falls from about 4 towards
its final value, fast or slow with the learning rate, with a little seeded noise per step.
The final value is smallest (1.0) at LR=10**-2.5, WIDTH=128, DECAY=0.3.

The noise is the one `crates/hone/examples/prune_sim.rs` draws, bit for bit (splitmix64 from
a key of the seed and the experiment's number, then Box-Muller): the simulation replays the
real loop's runs exactly, so what it finds over hundreds of seeds is what the real loop
would do on them."""

import math

STEPS = 50
OPTIMUM = 1.0
MASK = (1 << 64) - 1


def final(lr, width, decay):
    """The loss the configuration converges to (squares as products: Rust's `powi(2)`)."""
    a, b, c = math.log10(lr) + 2.5, math.log2(width) - 7.0, decay - 0.3
    return OPTIMUM + 0.3 * (a * a) + 0.05 * (b * b) + c * c


def key(seed, n):
    """The noise key of experiment `n` of the run with `seed` (prune_sim's `key`)."""
    return ((seed * 0x1000000001B3) & MASK) ^ ((n * 0xFF51AFD7ED558CCD) & MASK)


def _splitmix64(state):
    """The next state and output of splitmix64 (hone's `util::splitmix64`)."""
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def _unit(x):
    """A 64-bit draw as a float in [0, 1) (hone's `util::unit_f64`)."""
    return (x >> 11) * (1.0 / (1 << 53))


def loss(lr, width, decay, step, key=0):
    """The loss printed at `step` (1..STEPS); the curves of two configurations may cross."""
    tau = 5.0 + 5.0 / (1.0 + 100.0 * lr)
    clean = final(lr, width, decay) + 3.0 * math.exp(-step / tau)
    if step == STEPS:
        return clean
    s = key ^ ((step * 0x9E3779B97F4A7C15) & MASK)
    s, a = _splitmix64(s)
    s, b = _splitmix64(s)
    u1, u2 = 1.0 - _unit(a), _unit(b)
    return clean + 0.02 * math.sqrt(-2.0 * math.log(u1)) * math.cos(math.tau * u2)
