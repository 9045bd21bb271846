"""Paired bootstrap differences (``sts.paired``): by hand on a tiny example, against scipy's paired percentile
bootstrap, the average's resamples, seed groups, and per-pair predictions on disk refused on other pairs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import bootstrap, spearmanr

from sts_lightning.embeddings.errors import DataError
from sts_lightning.sts.paired import (
    AVG,
    Difference,
    differences_table,
    interval,
    paired_table,
    seeds_difference,
    task_rng,
)
from sts_lightning.sts.predictions import TaskPairs, check_same_pairs, read_predictions, write_predictions


def _systems(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two systems that share most of their noise (as two scorers of one encoder do), gold with ties."""
    rng = np.random.default_rng(seed)
    gold = np.round(rng.uniform(0, 5, n), 1)
    shared = rng.normal(size=n)
    a = gold + 1.2 * shared + 0.5 * rng.normal(size=n)
    b = gold + 1.2 * shared + 0.9 * rng.normal(size=n)
    return a, b, gold


def test_tiny_example_by_hand():
    gold = np.array([1.0, 2.0, 3.0, 4.0])
    a = np.array([0.1, 0.2, 0.3, 0.4])  # the gold order: Spearman 100
    b = np.array([0.1, 0.3, 0.2, 0.4])  # two neighbours swapped: 1 - 6 * 2 / (4 * 15) = 0.8
    table = paired_table([{"t": a}, {"t": b}], {"t": gold}, samples=50, seed=3)
    assert table.point["t"] == {0: pytest.approx(100.0), 1: pytest.approx(80.0)}
    # every resample by hand: the same drawn pair indices for both systems, scipy's Spearman of each, the difference
    idx = task_rng(3, "t").integers(0, 4, size=(50, 4), dtype=np.int32)
    with np.errstate(invalid="ignore", divide="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = np.array([100 * (spearmanr(a[i], gold[i]).statistic - spearmanr(b[i], gold[i]).statistic)
                             for i in idx])
    got = table.replicates["t"][0] - table.replicates["t"][1]
    assert np.allclose(got, want, equal_nan=True, atol=1e-9)
    d = table.difference("t", 0, 1)
    assert d.diff == pytest.approx(20.0) and (d.lo, d.hi) == pytest.approx(interval(want))


def test_interval_matches_scipys_paired_percentile_bootstrap():
    a, b, gold = _systems(300, 0)

    def statistic(x, y, g):
        return 100 * (spearmanr(x, g).statistic - spearmanr(y, g).statistic)

    ref = bootstrap((a, b, gold), statistic, paired=True, method="percentile", vectorized=False, n_resamples=2000,
                    rng=np.random.default_rng(1)).confidence_interval
    d = paired_table([{"t": a}, {"t": b}], {"t": gold}, samples=4000, seed=0).difference("t", 0, 1)
    assert d.diff == pytest.approx(statistic(a, b, gold), abs=1e-9)
    width = ref.high - ref.low
    # Monte-Carlo error of a 2.5 % percentile from 2000 / 4000 resamples: a few % of the width
    assert d.lo == pytest.approx(ref.low, abs=0.12 * width) and d.hi == pytest.approx(ref.high, abs=0.12 * width)
    # narrower than a difference of independent resamples (the widths' hypotenuse): the shared noise cancels
    alone = [np.ptp(interval(r)) for r in paired_table([{"t": a}, {"t": b}], {"t": gold}, 2000).replicates["t"].values()]
    assert width < 0.7 * math.hypot(*alone)


def test_average_resamples_are_the_mean_of_the_tasks_differences():
    (a1, b1, g1), (a2, b2, g2) = _systems(80, 1), _systems(120, 2)
    table = paired_table([{"x": a1, "y": a2}, {"x": b1, "y": b2}, {"x": b1}], {"x": g1, "y": g2}, samples=300)
    per_task = [table.replicates[t][0] - table.replicates[t][1] for t in ("x", "y")]
    avg = table.difference(AVG, 0, 1)
    assert (avg.lo, avg.hi) == pytest.approx(interval((per_task[0] + per_task[1]) / 2))
    assert avg.diff == pytest.approx((table.difference("x", 0, 1).diff + table.difference("y", 0, 1).diff) / 2)
    assert table.difference(AVG, 0, 2) is None and table.difference("y", 2, 0) is None  # system 2 lacks y
    assert table.difference("x", 2, 1).diff == 0.0 and table.difference("x", 2, 1).same


def test_seed_groups_pair_by_seed_or_fall_back_to_the_spread_of_a_difference():
    d = seeds_difference({0: 80.0, 1: 82.0, 2: 81.0}, {0: 79.0, 1: 80.0, 2: 80.5})
    assert d is not None and d.diff == pytest.approx(3.5 / 3)
    diffs = np.array([1.0, 2.0, 0.5])
    assert (d.lo, d.hi) == pytest.approx((diffs.mean() - diffs.std(ddof=1), diffs.mean() + diffs.std(ddof=1)))
    other = seeds_difference({0: 80.0, 1: 82.0}, {5: 79.0, 6: 80.0})
    assert other.hi - other.diff == pytest.approx(math.hypot(np.std([80, 82], ddof=1), np.std([79, 80], ddof=1)))
    assert seeds_difference({0: 80.0}, {0: 79.0, 1: 80.0}) is None


def test_differences_table_marks_intervals_that_contain_zero():
    text = differences_table("m / mean", ["sts12", AVG], [("m / cls", {"sts12": Difference(-1.5, -2.5, -0.5),
                                                                       AVG: Difference(0.3, -0.2, 0.9)})])
    assert text.splitlines()[:3] == ["| minus m / mean | sts12 | avg |", "|---|---|---|",
                                     "| m / cls | -1.50 [-2.50, -0.50] | +0.30 [-0.20, +0.90]~ |"]


def test_predictions_round_trip_and_other_pairs_are_refused(tmp_path):
    a, b, gold = _systems(20, 3)
    pairs = {"t": TaskPairs(gold, "abc")}
    write_predictions(tmp_path / "p.npz", {"row0": {"t": a}, "row1": {"t": b}}, pairs)
    first = read_predictions(tmp_path / "p.npz", "row1")
    assert np.allclose(first.sims["t"], b.astype(np.float32)) and first.pairs["t"].fingerprint == "abc"
    write_predictions(tmp_path / "q.npz", {"pred": {"t": a}}, {"t": TaskPairs(gold, "abd")})
    other = read_predictions(tmp_path / "q.npz", "pred")
    assert check_same_pairs([first, first], "t") is first.pairs["t"].gold
    with pytest.raises(DataError, match=r"p.npz \(row1\) and .*q.npz \(pred\) were not scored on the same pairs of t"):
        check_same_pairs([first, other], "t")
    (tmp_path / "bad.npz").write_text("no")
    with pytest.raises(DataError, match="is not a predictions file"):
        read_predictions(tmp_path / "bad.npz", "pred")
