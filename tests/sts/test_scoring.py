"""Correlation aggregation (all / mean / wmean) against hand-computed values, and score_tasks wiring."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import pearsonr, spearmanr

from sts_lightning.embeddings.scoring.scorer import VectorScorer
from sts_lightning.sts.readers import STSPairs
from sts_lightning.sts.scoring import aggregate, correlations, score_tasks
from sts_lightning.sts.tasks import STSTask


def _pairs(n, seed):
    rng = np.random.default_rng(seed)
    return STSPairs([f"a{seed}-{i}" for i in range(n)], [f"b{seed}-{i}" for i in range(n)], rng.uniform(0, 5, n))


def test_aggregates_match_definitions():
    task = STSTask("t", {"x": _pairs(10, 1), "y": _pairs(30, 2)})
    rng = np.random.default_rng(3)
    preds = {k: p.scores + rng.normal(0, 1.5, len(p)) for k, p in task.subsets.items()}
    res = aggregate(task, preds)
    sx = 100 * spearmanr(preds["x"], task.subsets["x"].scores).statistic
    sy = 100 * spearmanr(preds["y"], task.subsets["y"].scores).statistic
    pooled = 100 * spearmanr(np.concatenate([preds["x"], preds["y"]]),
                             np.concatenate([task.subsets["x"].scores, task.subsets["y"].scores])).statistic
    assert res["subsets"]["x"]["spearman"] == pytest.approx(sx)
    assert res["mean"]["spearman"] == pytest.approx((sx + sy) / 2)
    assert res["wmean"]["spearman"] == pytest.approx((10 * sx + 30 * sy) / 40)
    assert res["all"]["spearman"] == pytest.approx(pooled)
    px = 100 * pearsonr(preds["x"], task.subsets["x"].scores).statistic
    assert res["subsets"]["x"]["pearson"] == pytest.approx(px)


def test_constant_predictions_are_nan_not_crash():
    out = correlations(np.ones(5), np.arange(5.0))
    assert np.isnan(out["spearman"]) and out["n"] == 5


class LookupScorer(VectorScorer):
    """Embeds a sentence as a fixed vector so the expected similarity is known."""

    def __init__(self, table):
        self.table = table
        self.calls = 0

    def represent(self, sentences):
        self.calls += 1
        return {"embedding": torch.stack([self.table[s] for s in sentences])}


def test_score_tasks_encodes_once_and_splits_back():
    t1 = STSTask("t1", {"x": STSPairs(["a", "b", "a"], ["b", "c", "c"], np.array([1.0, 2.0, 3.0]))})
    t2 = STSTask("t2", {"y": STSPairs(["c", "a"], ["a", "b"], np.array([0.0, 5.0]))})
    table = {"a": torch.tensor([1.0, 0.0]), "b": torch.tensor([1.0, 1.0]), "c": torch.tensor([0.0, 1.0])}
    scorer = LookupScorer(table)
    res = score_tasks(scorer, [t1, t2])
    assert scorer.calls == 1
    assert set(res) == {"t1", "t2"}
    # t1 predictions: cos(a,b)=.707, cos(b,c)=.707, cos(a,c)=0 -> gold 1,2,3 ranks
    assert res["t1"]["all"]["n"] == 3
    assert res["t2"]["all"]["spearman"] == pytest.approx(100.0)
