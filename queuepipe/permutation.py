"""A seeded random permutation of ``range(n)`` that stores nothing per element.

A global shuffle visits every record of a dataset in random order. Writing that order down
(``rng.permutation(n)``) costs 8 bytes per record, which grows with the dataset; a
*bijection* computes the image of any position on demand instead. This one is a Feistel
network: a position's bits are split in two halves, and four rounds each mix one half into
the other with a keyed hash. Every round can be undone, so the map is one-to-one on the
``4**k`` values of its ``2k`` bits; positions mapped past ``n`` are mapped again ("cycle
walking") until they land inside, which keeps it one-to-one on ``range(n)``.

::

    position --> [ left | right ] --round 1..4--> [ left' | right' ] --> image
                                                       |
                                        >= n ? map again (cycle walk)

Usage::

    perm = Permutation(10, seed=3)
    perm(np.arange(10))          # every value of 0..9 once, in a seeded order
"""

from __future__ import annotations

import numpy as np

__all__ = ["Permutation"]

_ROUNDS = 4
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a cheap hash whose output bits each depend on every input
    bit (uint64 arithmetic wraps, as intended)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class Permutation:
    """A seeded bijection of ``range(n)``, evaluated on arrays of positions.

    Args:
      n: the size of the domain (``n >= 0``).
      seed: any integer, or a sequence of them (such as ``[seed, epoch]``); the same seed
        gives the same permutation on every machine.
    """

    def __init__(self, n: int, seed) -> None:
        if n < 0:
            raise ValueError(f"a permutation of range(n) needs n >= 0, got {n}")
        self.n = int(n)
        half = 1
        while (1 << (2 * half)) < max(self.n, 2):
            half += 1
        self._half = np.uint64(half)
        self._mask = np.uint64((1 << half) - 1)
        entropy = np.random.SeedSequence(seed).generate_state(_ROUNDS, dtype=np.uint64)
        self._keys = [np.uint64(k) for k in entropy]

    def _once(self, x: np.ndarray) -> np.ndarray:
        left, right = x >> self._half, x & self._mask
        with np.errstate(over="ignore"):
            for key in self._keys:
                left, right = right, left ^ (_mix((right + key) * _GOLDEN) & self._mask)
        return (left << self._half) | right

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        """The images of ``positions`` (each in ``range(n)``), as int64."""
        x = np.asarray(positions, dtype=np.uint64)
        if len(x) and int(x.max()) >= self.n:
            raise ValueError(f"positions must lie in range({self.n})")
        out = self._once(x)
        outside = np.flatnonzero(out >= np.uint64(self.n))
        while len(outside):
            out[outside] = self._once(out[outside])
            outside = outside[out[outside] >= np.uint64(self.n)]
        return out.astype(np.int64)
