"""Bootstrap 95% confidence intervals of a Spearman correlation: pairs resampled with replacement, vectorized.

Percentile method (as ``scipy.stats.bootstrap``), a fixed seed, the same resamples for every scorer of a task. A
resample is a row of draw COUNTS whose average ranks follow from cumulative counts over the sorted distinct values,
so no resample is sorted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
CHUNK_CELLS = 500_000  # resamples x pairs per array pass: 4 MB a float64 array, small enough to stay in cache


@dataclass(frozen=True)
class Bootstrap:
    """``samples`` resamples (0: no intervals) drawn from ``np.random.default_rng(seed)`` afresh for each set of pairs."""

    samples: int = 1000
    seed: int = 0

    @property
    def enabled(self) -> bool:
        return self.samples > 0


def draw_counts(n: int, samples: int, rng: np.random.Generator) -> np.ndarray:
    """(samples, n) how often each of the n pairs is drawn in each resample of n pairs with replacement."""
    idx = rng.integers(0, n, size=(samples, n), dtype=np.int32)  # int32: half the memory traffic of int64
    idx += (np.arange(samples, dtype=np.int32) * n)[:, None]  # samples * n < 2**31: CHUNK_CELLS
    return np.bincount(idx.ravel(), minlength=samples * n).reshape(samples, n).astype(np.float64)


class ResampledRanks:
    """Tie-averaged ranks (as ``scipy.stats.rankdata``) of one side's values within resamples, centred: with ``w`` a
    resample's count of each distinct value and ``c`` its cumulative sum, every copy ranks ``c - (w - 1) / 2``."""

    def __init__(self, values: np.ndarray):
        self.order = np.argsort(values, kind="stable")
        ordered = values[self.order]
        new_value = np.r_[True, ordered[1:] != ordered[:-1]]
        self.starts = np.flatnonzero(new_value)
        self.inverse = np.empty(values.size, dtype=np.intp)
        self.inverse[self.order] = np.cumsum(new_value) - 1  # each pair's distinct value, by rank
        self.ties = self.starts.size < values.size

    def centred(self, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(each pair's centred rank in each resample, each resample's sum of count x centred rank squared)."""
        per_value = counts[:, self.order]
        if self.ties:
            per_value = np.add.reduceat(per_value, self.starts, axis=1)
        rank = np.cumsum(per_value, axis=1) - (per_value - 1.0) / 2.0 - (counts.shape[1] + 1) / 2.0
        return rank[:, self.inverse], np.einsum("ij,ij,ij->i", per_value, rank, rank)


def spearman_of_counts(predicted: np.ndarray, gold: np.ndarray, counts: np.ndarray,
                       ranks: tuple[ResampledRanks, ResampledRanks] | None = None) -> np.ndarray:
    """Spearman x100 of every resample given by a row of ``counts`` (NaN where a side is constant)."""
    rank_x, rank_y = ranks or (ResampledRanks(predicted), ResampledRanks(gold))
    dx, var_x = rank_x.centred(counts)
    dy, var_y = rank_y.centred(counts)
    cov = np.einsum("ij,ij,ij->i", counts, dx, dy)
    var = var_x * var_y
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(var > 0, 100.0 * cov / np.sqrt(np.where(var > 0, var, 1.0)), np.nan)


def shared_replicates(predictions: list[np.ndarray], gold: np.ndarray, samples: int,
                      rng: np.random.Generator) -> np.ndarray:
    """(systems, samples) Spearman x100 of every system on the SAME resamples drawn from ``rng`` (paired when several)."""
    gold = np.asarray(gold, dtype=np.float64)
    preds = [np.asarray(p, dtype=np.float64) for p in predictions]
    n = gold.size
    gold_ranks = ResampledRanks(gold)
    ranks = [ResampledRanks(p) for p in preds]
    step = max(1, CHUNK_CELLS // max(n, 1))
    out = np.empty((len(preds), samples))
    for start in range(0, samples, step):
        counts = draw_counts(n, min(step, samples - start), rng)
        for i, (p, r) in enumerate(zip(preds, ranks, strict=True)):
            out[i, start:start + counts.shape[0]] = spearman_of_counts(p, gold, counts, (r, gold_ranks))
    return out


def bootstrap_spearman(predicted: np.ndarray, gold: np.ndarray, samples: int, seed: int) -> np.ndarray:
    """``samples`` bootstrap replicates of Spearman x100 over the pairs (predicted[i], gold[i])."""
    return shared_replicates([predicted], gold, samples, np.random.default_rng(seed))[0]


def percentile_interval(replicates: np.ndarray, confidence: float = CONFIDENCE) -> list[float]:
    """[lo, hi]: the percentile interval of the finite replicates (NaN, NaN when none is finite)."""
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        return [float("nan"), float("nan")]
    tail = 100.0 * (1.0 - confidence) / 2.0
    lo, hi = np.percentile(finite, [tail, 100.0 - tail])
    return [float(lo), float(hi)]


def spearman_interval(predicted: np.ndarray, gold: np.ndarray, bootstrap: Bootstrap) -> list[float]:
    """The bootstrap 95% interval [lo, hi] of Spearman x100 (pairs resampled with replacement, percentile method)."""
    if np.asarray(gold).size < 2:
        return [float("nan"), float("nan")]
    return percentile_interval(bootstrap_spearman(predicted, gold, bootstrap.samples, bootstrap.seed))
