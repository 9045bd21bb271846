"""Bootstrap 95% confidence intervals of a Spearman correlation: pairs resampled with replacement, vectorized.

Why: most differences between methods in our tables are under one point, and an STS test set of a few thousand
pairs moves a Spearman by about that much from the sample alone; an interval says which differences the data can
tell apart. Percentile method (as ``scipy.stats.bootstrap(method="percentile", paired=True)``), with a fixed seed:
the same pairs are drawn for every scorer of a task, so two rows of one table are compared on the same resamples.

Why not ``scipy.stats.bootstrap`` itself: it calls ``spearmanr`` once per resample in Python (about 1 s per 1000
resamples of 10k pairs, per task and scorer). Here a resample is a row of draw COUNTS over the original pairs, and
the average ranks of a resample follow from cumulative counts over the sorted distinct values: no sort per
resample, a few array passes over (resamples x pairs) numbers (``tests/sts/test_bootstrap.py`` times it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
CHUNK_CELLS = 2_000_000  # resamples x pairs per array pass: bounds memory (~16 MB a float64 array) for any n


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
    idx = rng.integers(0, n, size=(samples, n))
    flat = idx + (np.arange(samples)[:, None] * n)
    return np.bincount(flat.ravel(), minlength=samples * n).reshape(samples, n).astype(np.float64)


def resampled_ranks(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties averaged, as ``scipy.stats.rankdata``) of each pair within each resample.

    A pair drawn k times holds k equal values; pairs sharing a value tie too. With ``w`` the resample's count of
    each distinct value (in increasing order) and ``c`` its cumulative sum, every copy of that value ranks
    ``c - (w - 1) / 2``; a pair not drawn gets a rank too, but weight 0 wherever it is used.
    """
    distinct, inverse = np.unique(values, return_inverse=True)
    samples, groups = counts.shape[0], distinct.size
    flat = inverse[None, :] + (np.arange(samples)[:, None] * groups)
    per_value = np.bincount(flat.ravel(), weights=counts.ravel(), minlength=samples * groups).reshape(samples, groups)
    rank_of_value = np.cumsum(per_value, axis=1) - (per_value - 1.0) / 2.0
    return np.take_along_axis(rank_of_value, np.broadcast_to(inverse, counts.shape), axis=1)


def weighted_pearson(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row: the Pearson correlation of ``x`` and ``y`` with each column counted ``weights`` times (NaN if constant)."""
    total = weights.sum(axis=1, keepdims=True)
    dx = x - (weights * x).sum(axis=1, keepdims=True) / total
    dy = y - (weights * y).sum(axis=1, keepdims=True) / total
    cov = (weights * dx * dy).sum(axis=1)
    var = (weights * dx * dx).sum(axis=1) * (weights * dy * dy).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(var > 0, cov / np.sqrt(np.where(var > 0, var, 1.0)), np.nan)


def spearman_of_counts(predicted: np.ndarray, gold: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The Spearman correlation (x100) of every resample given by a row of ``counts``."""
    weights = counts
    return 100.0 * weighted_pearson(resampled_ranks(predicted, weights), resampled_ranks(gold, weights), weights)


def bootstrap_spearman(predicted: np.ndarray, gold: np.ndarray, samples: int, seed: int) -> np.ndarray:
    """``samples`` bootstrap replicates of Spearman x100 over the pairs (predicted[i], gold[i])."""
    predicted, gold = np.asarray(predicted, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    n = predicted.size
    rng = np.random.default_rng(seed)
    step = max(1, CHUNK_CELLS // max(n, 1))
    out = [spearman_of_counts(predicted, gold, draw_counts(n, min(step, samples - start), rng))
           for start in range(0, samples, step)]
    return np.concatenate(out) if out else np.empty(0)


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
