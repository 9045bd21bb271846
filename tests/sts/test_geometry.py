"""Alignment and uniformity (Wang & Isola 2020) against brute force, and where they are reported."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from sts_lightning.embeddings.scoring.scorer import Scorer, VectorScorer
from sts_lightning.sts.geometry import alignment, uniformity
from sts_lightning.sts.readers import STSPairs
from sts_lightning.sts.scoring import score_tasks
from sts_lightning.sts.tasks import STSTask


def test_alignment_is_the_mean_squared_distance_of_unit_vectors():
    x, y = torch.tensor([[3.0, 0.0], [0.0, 2.0]]), torch.tensor([[0.0, 1.0], [0.0, 5.0]])
    assert alignment(x, y) == pytest.approx((2.0 + 0.0) / 2)
    assert math.isnan(alignment(x[:0], y[:0]))


def test_uniformity_equals_brute_force_and_orders_spread_before_collapse():
    torch.manual_seed(0)
    x = torch.randn(9, 4, dtype=torch.float64)
    unit = x / x.norm(dim=1, keepdim=True)
    pairs = [math.exp(-2 * float((unit[i] - unit[j]).pow(2).sum())) for i, j in itertools.combinations(range(9), 2)]
    assert uniformity(x) == pytest.approx(math.log(np.mean(pairs)), rel=1e-9)
    collapsed = torch.ones(9, 4, dtype=torch.float64) + 1e-9 * torch.randn(9, 4, dtype=torch.float64)
    assert uniformity(collapsed) == pytest.approx(0.0, abs=1e-6) and uniformity(x) < -0.5  # lower = more uniform
    assert uniformity(x, max_sentences=5) == pytest.approx(uniformity(x[[0, 2, 4, 6, 8]]))
    assert math.isnan(uniformity(x[:1]))


class _Table(VectorScorer):
    """Vectors looked up by sentence: a scorer with a known geometry."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors, self.name = vectors, "table"

    def represent(self, sentences):
        return {"embedding": torch.tensor([self.vectors[s] for s in sentences])}


def test_score_tasks_reports_the_geometry_of_each_task_from_the_scored_vectors():
    vectors = {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 1.0], "d": [-1.0, 0.0]}
    task = STSTask("t", {"x": STSPairs(["a", "a"], ["c", "b"], np.array([4.5, 1.0])),
                         "y": STSPairs(["d"], ["d"], np.array([5.0]))})
    result = score_tasks(_Table(vectors), [task])["t"]["geometry"]
    # positives (gold > 4): (a, c) at squared distance 2 - sqrt(2), (d, d) at 0
    assert result["positive_pairs"] == 2 and result["alignment"] == pytest.approx((2 - math.sqrt(2)) / 2)
    assert result["uniformity"] == pytest.approx(uniformity(torch.tensor([vectors[s] for s in "abcd"])))


def test_scorers_without_one_vector_get_no_geometry():
    class Mixture(Scorer):
        name = "mixture"

        def represent(self, sentences):
            return {"mixture": torch.ones(len(sentences), 3, 2)}

        def similarity(self, a, b):
            return torch.arange(a["mixture"].shape[0], dtype=torch.float32)

    task = STSTask("t", {"x": STSPairs(["a", "b", "c"], ["b", "c", "a"], np.array([4.5, 1.0, 3.0]))})
    assert "geometry" not in score_tasks(Mixture(), [task])["t"]


def test_a_task_without_positive_pairs_has_no_alignment_rather_than_nan():
    task = STSTask("t", {"x": STSPairs(["a", "b"], ["c", "d"], np.array([1.0, 2.0]))})
    vectors = {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 1.0], "d": [-1.0, 0.0]}
    geometry = score_tasks(_Table(vectors), [task])["t"]["geometry"]
    assert set(geometry) == {"uniformity", "positive_pairs"} and geometry["positive_pairs"] == 0
