"""Bootstrap intervals of Spearman: exact per resample, scipy's percentile interval, coverage, speed."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from scipy.stats import bootstrap, norm, spearmanr

from sts_lightning.sts.bootstrap import (
    Bootstrap,
    bootstrap_spearman,
    percentile_interval,
    spearman_interval,
    spearman_of_counts,
)


def _pairs(n: int, rho: float, seed: int, decimals: int | None = 1) -> tuple[np.ndarray, np.ndarray]:
    """A bivariate normal sample (correlation ``rho``); gold rounded so that it ties as STS gold scores do."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = rho * x + math.sqrt(1 - rho**2) * rng.normal(size=n)
    return x, (np.round(y, decimals) if decimals is not None else y)


def test_every_resample_is_scipys_spearman_of_those_pairs_ties_included():
    x, y = _pairs(40, 0.6, 0)
    x = np.round(x, 1)  # ties on both sides, beyond the ties of drawing a pair twice
    idx = np.random.default_rng(1).integers(0, x.size, size=(25, x.size))
    counts = np.stack([np.bincount(i, minlength=x.size) for i in idx]).astype(np.float64)
    want = [100 * spearmanr(x[i], y[i]).statistic for i in idx]
    assert spearman_of_counts(x, y, counts) == pytest.approx(want, abs=1e-9)


def test_interval_matches_scipys_percentile_bootstrap_within_monte_carlo_error():
    x, y = _pairs(300, 0.7, 2)
    samples = 2000
    ours = bootstrap_spearman(x, y, samples, seed=0)
    lo, hi = percentile_interval(ours)
    ref = bootstrap((x, y), lambda a, b: 100 * spearmanr(a, b).statistic, paired=True, vectorized=False,
                    n_resamples=samples, method="percentile", confidence_level=0.95, random_state=1)
    # Two independent Monte Carlo estimates of the 2.5% / 97.5% quantiles: each has a standard error of
    # sqrt(p (1 - p) / B) / pdf(z_p) bootstrap standard deviations; allow 4 standard errors of their difference.
    p = 0.025
    tol = 4 * math.sqrt(2) * math.sqrt(p * (1 - p) / samples) / norm.pdf(norm.ppf(p)) * float(np.std(ours))
    assert lo == pytest.approx(ref.confidence_interval.low, abs=tol)
    assert hi == pytest.approx(ref.confidence_interval.high, abs=tol)
    assert lo < 100 * spearmanr(x, y).statistic < hi


def test_the_interval_covers_the_population_spearman_about_95_percent_of_the_time():
    rho, datasets = 0.6, 200
    truth = 100 * 6 / math.pi * math.asin(rho / 2)  # Spearman of a bivariate normal (Pearson / Kendall 1907)
    hits = 0
    for seed in range(datasets):
        x, y = _pairs(150, rho, 100 + seed, decimals=None)
        lo, hi = spearman_interval(x, y, Bootstrap(samples=400, seed=seed))
        hits += lo <= truth <= hi
    # binomial standard error of a 95% coverage over 200 datasets: 1.5 points; percentile intervals of a
    # correlation run slightly short at n = 150, so 4 standard errors below and nothing above.
    assert 0.95 - 4 * math.sqrt(0.95 * 0.05 / datasets) <= hits / datasets


def test_a_fixed_seed_gives_the_same_interval_and_another_seed_another():
    x, y = _pairs(200, 0.5, 3)
    assert spearman_interval(x, y, Bootstrap(500, 0)) == spearman_interval(x, y, Bootstrap(500, 0))
    assert spearman_interval(x, y, Bootstrap(500, 0)) != spearman_interval(x, y, Bootstrap(500, 1))


def test_constant_or_too_few_pairs_give_no_interval():
    assert all(math.isnan(v) for v in spearman_interval(np.ones(20), np.arange(20.0), Bootstrap(100, 0)))
    assert all(math.isnan(v) for v in spearman_interval(np.ones(1), np.ones(1), Bootstrap(100, 0)))


def test_a_thousand_resamples_of_ten_thousand_pairs_take_well_under_two_seconds():
    x, y = _pairs(10_000, 0.7, 4)
    best = math.inf
    for _ in range(3):  # the best of three: the test machine is shared
        start = time.perf_counter()
        spearman_interval(x, y, Bootstrap(1000, 0))
        best = min(best, time.perf_counter() - start)
    assert best < 2.0, f"{best:.2f} s"
