"""Latte-Mix's sign convention (issue 27): the distances are returned as distances, the scorer's similarity is
their negative, so a closer pair always scores higher and Spearman against gold keeps its sign."""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.methods.latte_mix.maths import mixture_js_divergence, mixture_l2_distance
from sts_lightning.embeddings.methods.latte_mix.nets import TokenPosterior
from sts_lightning.embeddings.methods.latte_mix.scorer import LatteMixScorer

pytestmark = pytest.mark.usefixtures("one_thread")
SAME = ["a man plays a guitar .", "a dog runs in the park ."]
OTHER = ["a man plays the guitar .", "two children read a book on the bench ."]


@pytest.mark.parametrize(("distance", "fn"), [("js", mixture_js_divergence), ("l2", mixture_l2_distance)])
def test_similarity_is_minus_the_distance_and_higher_for_identical_sentences(tiny_encoder, distance, fn):
    torch.manual_seed(0)
    scorer = LatteMixScorer(tiny_encoder, TokenPosterior(32, "categorical", 4, 5, 16), distance=distance)
    a, b = scorer.represent(SAME), scorer.represent(OTHER)
    dist = fn(a["mixture"], b["mixture"])
    assert torch.all(dist > 0)  # the documented quantity: a divergence / distance, never negative
    torch.testing.assert_close(scorer.similarity(a, b), -dist)
    identical = scorer.similarity(a, a)
    assert torch.all(identical.abs() < 1e-5) and torch.all(identical > scorer.similarity(a, b))


def test_the_sign_convention_is_where_users_read_it():
    from sts_lightning.embeddings.methods.latte_mix.scorer import LatteMixExportScorer
    from sts_lightning.embeddings.methods.registry import scorer_groups

    doc = " ".join((LatteMixScorer.similarity.__doc__ or "").split())
    assert "higher = more similar" in doc and "-distance for ``js``" in doc
    summary = next(g.summary for g in scorer_groups() if "latte_mix" in g.names)  # evaluate.py --help
    assert "similarity = -distance (higher = more similar)" in summary
    assert "similarity = -distance" in (LatteMixExportScorer.__doc__ or "")
