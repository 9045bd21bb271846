"""An epoch's order of ``n`` items without an array of ``n``: a keyed bijection on ``[0, n)``.

A balanced Feistel network over ``2 * h`` bits (``4**h >= n``), 8 rounds of SplitMix64's finaliser keyed by
``(seed, epoch)``, restricted to ``[0, n)`` by cycle walking. Any slice of positions is computed on its own in
``uint64`` arithmetic: the same order on every machine and rank, and no 8 bytes an item per rank.
"""

from __future__ import annotations

import numpy as np

ROUNDS = 8
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: every input bit moves every output bit (a good keyed round function)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


class EpochOrder:
    """``order[positions]``: the items at those positions of the epoch; ``shuffle=False`` is the identity."""

    def __init__(self, n: int, seed: int, epoch: int, shuffle: bool = True):
        self.n, self.shuffle = int(n), shuffle
        self.half = max(1, ((self.n - 1).bit_length() + 1) // 2)  # 4**half >= n
        self.mask = np.uint64((1 << self.half) - 1)
        self.keys = np.random.default_rng([seed, epoch]).bit_generator.random_raw(ROUNDS).astype(np.uint64)

    def _feistel(self, x: np.ndarray) -> np.ndarray:
        shift = np.uint64(self.half)
        left, right = x >> shift, x & self.mask
        for key in self.keys:
            left, right = right, left ^ (_mix(right ^ key) & self.mask)
        return (left << shift) | right

    def __getitem__(self, positions: np.ndarray) -> np.ndarray:
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= self.n):
            raise IndexError(f"positions outside [0, {self.n})")
        if not self.shuffle:
            return positions
        x = self._feistel(positions.astype(np.uint64))
        out = np.flatnonzero(x >= self.n)
        while out.size:  # cycle walking: leave the padding values [n, 4**half) by applying the network again
            x[out] = self._feistel(x[out])
            out = out[x[out] >= self.n]
        return x.astype(np.int64)
