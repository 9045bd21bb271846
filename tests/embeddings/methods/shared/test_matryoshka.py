"""Matryoshka training (``embeddings.methods.shared.matryoshka``): equal to sentence-transformers' ``MatryoshkaLoss``
around their ``CoSENTLoss`` and ``MultipleNegativesRankingLoss`` on one tiny model (loss and every gradient), and
bad dimensions or weights refused in one line naming the key."""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.cosent.objective import cosent_loss
from sts_lightning.embeddings.methods.shared.in_batch import multiple_negatives_ranking_loss
from sts_lightning.embeddings.methods.shared.matryoshka import (
    check_matryoshka,
    check_matryoshka_fits,
    matryoshka_loss,
    shrink,
)
from tests.helpers import assert_same_gradients

S1 = ["a man plays a guitar .", "a dog runs in the park .", "a child reads a book .", "a girl rides a horse ."]
S2 = ["a man plays the piano .", "a dog is running in the park .", "two cats eat food .", "a boy rides a bike ."]
S3 = ["two cats eat food .", "a girl rides a horse .", "a man plays a guitar .", "a dog runs in the park ."]
SCORES = torch.tensor([0.64, 0.96, 0.04, 0.3])
DIMS, WEIGHTS = (32, 16, 8), (1.0, 0.5, 2.0)  # the tiny BERT is 32-d


@pytest.fixture(scope="module")
def st_model(tiny_model_dir):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    word = Transformer(str(tiny_model_dir), max_seq_length=32)
    model = SentenceTransformer(modules=[word, Pooling(word.get_embedding_dimension(), "mean")])
    return model.eval()  # no dropout: both runs see the same vectors


def _run(model, loss_of_features):
    model.zero_grad()
    loss = loss_of_features()
    loss.backward()
    return loss.detach(), {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


def _embed(model, features):
    return [model(dict(f))["sentence_embedding"] for f in features]


@pytest.mark.parametrize("loss", ["cosent", "mnrl"])
def test_equals_sentence_transformers_matryoshka_loss(st_model, loss, one_thread):
    from sentence_transformers.sentence_transformer.losses import (
        CoSENTLoss,
        MatryoshkaLoss,
        MultipleNegativesRankingLoss,
    )

    texts = (S1, S2) if loss == "cosent" else (S1, S2, S3)
    features = [st_model.tokenize(t) for t in texts]
    base = CoSENTLoss(st_model) if loss == "cosent" else MultipleNegativesRankingLoss(st_model)
    theirs_fn = MatryoshkaLoss(st_model, base, list(DIMS), list(WEIGHTS))
    labels = SCORES if loss == "cosent" else None
    ours_fn = (lambda u, v: cosent_loss(u, v, SCORES, gather=False)) if loss == "cosent" else \
        (lambda a, p, n: multiple_negatives_ranking_loss(a, p, n, gather=False))
    wrapped = matryoshka_loss(ours_fn, DIMS, WEIGHTS)
    ours, our_grads = _run(st_model, lambda: wrapped(*_embed(st_model, features)))
    theirs, their_grads = _run(st_model, lambda: theirs_fn([dict(f) for f in features], labels))
    # fp32 sums of a few hundred terms per dimension, three dimensions: a few ulps of the loss
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert_same_gradients(our_grads, their_grads)


def test_shrink_is_the_normalised_prefix():
    x = torch.tensor([[3.0, 4.0, 12.0]])
    torch.testing.assert_close(shrink(x, 2), torch.tensor([[0.6, 0.8]]))


def test_zero_weight_skips_a_dimension():
    u = torch.randn(4, 8)
    got = matryoshka_loss(lambda e: e.sum(), (8, 4), (0.0, 1.0))(u)
    torch.testing.assert_close(got, shrink(u, 4).sum())


def test_weights_default_to_one():
    assert check_matryoshka([64, 32], None) == ((64, 32), (1.0, 1.0))
    assert check_matryoshka(None, None) is None


@pytest.mark.parametrize("dims, weights, match", [
    ([], None, "model.matryoshka_dims=.*non-empty"),
    (64, None, "model.matryoshka_dims=64 must be a non-empty list"),
    ([64, 0], None, r"model.matryoshka_dims=\[64, 0\] must hold integers > 0"),
    ([64, -8], None, "integers > 0"),
    ([64, 12.5], None, "integers > 0"),
    ([32, 64], None, r"strictly decreasing .* e.g. \[64, 32\]"),
    ([64, 64, 32], None, "no repeats"),
    ([64, 32], [1.0], r"model.matryoshka_weights=\[1.0\] must hold one weight per dimension"),
    ([64, 32], [1.0, -1.0], "model.matryoshka_weights=.*>= 0"),
    ([64, 32], [0, 0], "not all 0"),
    (None, [1.0], "model.matryoshka_weights=.*without model.matryoshka_dims"),
])
def test_bad_values_name_the_key(dims, weights, match):
    with pytest.raises(ConfigError, match=match) as err:
        check_matryoshka(dims, weights)
    assert "\n" not in str(err.value)


def test_a_dimension_above_the_models_is_refused():
    with pytest.raises(ConfigError, match=r"model.matryoshka_dims=\[64, 16\]: 64 is larger than .* 32"):
        check_matryoshka_fits((64, 16), 32)
    check_matryoshka_fits((32, 16), 32)
