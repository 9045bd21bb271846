"""Contrastive Tension's objectives (embeddings.methods.ct.objective): by hand, against sentence-transformers'
ContrastiveTensionLoss on a tiny model, the CT batch layout and the halved views."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sts_lightning.embeddings.methods.ct.objective import (
    ct_batch_labels,
    ct_logits,
    ct_loss,
    in_batch_tension_loss,
    make_ct_pairs,
    per_label_losses,
)
from tests.helpers import WORDS

CORPUS = [f"{a} {b} {c} ." for a, b, c in zip(WORDS[::3], WORDS[1::3], WORDS[2::3], strict=False)]


# -------------------------------------------------------------------------------------------- SBERT


# -------------------------------------------------------------------------------- Contrastive Tension
def test_ct_logits_and_loss_by_hand():
    e1 = torch.tensor([[1.0, 2.0], [0.5, -1.0], [0.0, 3.0]], dtype=torch.float64)
    e2 = torch.tensor([[2.0, 0.5], [1.0, 1.0], [-1.0, -0.5]], dtype=torch.float64)
    logits = ct_logits(e1, e2)
    assert logits.tolist() == [3.0, -0.5, -1.5]
    labels = torch.tensor([1, 0, 0])
    sig = [1 / (1 + np.exp(-t)) for t in (3.0, -0.5, -1.5)]
    by_hand = [-np.log(sig[0]), -np.log(1 - sig[1]), -np.log(1 - sig[2])]
    assert ct_loss(logits, labels).item() == pytest.approx(np.mean(by_hand), abs=1e-12)
    assert ct_loss(logits, labels, reduction="sum").item() == pytest.approx(np.sum(by_hand), abs=1e-12)
    assert ct_loss(logits, labels, reduction="none").tolist() == pytest.approx(by_hand, abs=1e-12)


def test_per_label_losses_are_the_masked_means_without_boolean_indexing():
    logits = torch.tensor([3.0, -0.5, -1.5, 0.25, 2.0, -4.0], dtype=torch.float64)
    labels = ct_batch_labels(6, 2)
    per_pair = ct_loss(logits, labels, reduction="none")
    pos, neg = per_label_losses(logits, labels)
    torch.testing.assert_close(pos, per_pair[labels == 1].mean(), rtol=0, atol=1e-15)
    torch.testing.assert_close(neg, per_pair[labels == 0].mean(), rtol=0, atol=1e-15)


def test_ct_batch_labels_layout():
    assert ct_batch_labels().tolist() == [1.0] + [0.0] * 7 + [1.0] + [0.0] * 7
    assert ct_batch_labels(8, 1).tolist() == [1.0] + [0.0] * 7  # per-rank half of the paper's batch
    for bad in ((16, 3), (16, 0), (2, 2), (16, 16)):
        with pytest.raises(ValueError, match="groups"):
            ct_batch_labels(*bad)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_make_ct_pairs_layout(seed):
    texts1, texts2, labels = make_ct_pairs(CORPUS, np.random.default_rng(seed))
    assert len(texts1) == len(texts2) == 16
    assert labels.tolist() == ct_batch_labels().tolist()
    for t1, t2, y in zip(texts1, texts2, labels.tolist(), strict=True):
        assert t1 in CORPUS and t2 in CORPUS
        assert (t1 == t2) == (y == 1.0)  # exactly the 2 positives are identical pairs


def test_make_ct_pairs_draws_like_the_reference_code():
    """Positives first, then 2k negatives per group: model 1 takes the first k, model 2 the next k."""
    corpus = [f"sentence {i}" for i in range(10_000)]
    texts1, texts2, _ = make_ct_pairs(corpus, np.random.default_rng(7))
    twin = np.random.default_rng(7)
    pos, neg = twin.integers(0, 10_000, size=2), twin.integers(0, 10_000, size=28)
    expected1 = [pos[0], *neg[0:7], pos[1], *neg[14:21]]
    expected2 = [pos[0], *neg[7:14], pos[1], *neg[21:28]]
    assert texts1 == [corpus[i] for i in expected1]
    assert texts2 == [corpus[i] for i in expected2]


def test_make_ct_pairs_is_deterministic_and_redraws_identical_negatives():
    a = make_ct_pairs(CORPUS, np.random.default_rng(3))
    b = make_ct_pairs(CORPUS, np.random.default_rng(3))
    c = make_ct_pairs(CORPUS, np.random.default_rng(4))
    assert a[:2] == b[:2] and a[:2] != c[:2]
    # Two distinct sentences, one duplicated: collisions are frequent, yet every negative row differs.
    t1, t2, labels = make_ct_pairs(["x .", "x .", "y ."], np.random.default_rng(0), batch_size=32, positives=4)
    assert labels.sum().item() == 4
    assert all((s1 == s2) == (y == 1.0) for s1, s2, y in zip(t1, t2, labels.tolist(), strict=True))
    with pytest.raises(ValueError, match="two distinct sentences"):
        make_ct_pairs(["same .", "same ."], np.random.default_rng(0))


def test_ct_matches_sentence_transformers_contrastive_tension_loss(st_model):
    """ST derives labels from identical input ids; ours come from the layout. Same loss (ST sums)."""
    from sentence_transformers.sentence_transformer.losses import ContrastiveTensionLoss

    texts1, texts2, labels = make_ct_pairs(CORPUS, np.random.default_rng(0))
    theirs = ContrastiveTensionLoss(st_model)  # model1 = a deep copy of model2 = st_model
    f1, f2 = st_model.preprocess(texts1), st_model.preprocess(texts2)
    with torch.no_grad():
        their_loss = theirs([f1, f2], None)
        # Before any step both CT models are the same weights, so st_model stands for either.
        emb1 = st_model(st_model.preprocess(texts1))["sentence_embedding"]
        emb2 = st_model(st_model.preprocess(texts2))["sentence_embedding"]
        ours = ct_loss(ct_logits(emb1, emb2), labels, reduction="sum")
    torch.testing.assert_close(ours, their_loss, rtol=1e-6, atol=1e-6)


def test_split_views_gives_disjoint_halves_of_the_same_sentence():
    import numpy as np

    from sts_lightning.embeddings.methods.ct.objective import split_views

    rng = np.random.default_rng(0)
    texts = ["one two three four five six", "alpha beta", "single"]
    left, right = split_views(texts, texts, rng)
    for text, a, b in zip(texts[:2], left[:2], right[:2], strict=True):
        assert set(a.split()).isdisjoint(b.split()) and text.startswith(a) and text.endswith(b)
    assert left[2] == right[2] == "single"  # one word: kept whole on both sides
    cuts = {len(split_views(texts[:1], texts[:1], rng)[0][0].split()) for _ in range(50)}
    assert cuts <= {2, 3, 4} and len(cuts) > 1  # drawn from the middle third, not always the same


def test_mixed_split_views_flips_sides_per_sentence_and_keeps_positives_complementary():
    import numpy as np

    from sts_lightning.embeddings.methods.ct.objective import split_views

    rng = np.random.default_rng(0)
    texts = [f"w{i} a{i} b{i} c{i} d{i} e{i}" for i in range(200)]
    view1, view2 = split_views(texts, texts, rng, mixed=True)
    copy1_got_left = [text.startswith(a) for text, a in zip(texts, view1, strict=True)]
    for text, a, b in zip(texts, view1, view2, strict=True):
        left, right = (a, b) if text.startswith(a) else (b, a)
        assert f"{left} {right}" == text  # the two copies still see complementary sides of one sentence
    assert 60 < sum(copy1_got_left) < 140  # a coin flip per sentence, not a fixed side
    again = split_views(texts[:3] + texts[:3], texts[:3] + texts[:3], rng, mixed=True)
    assert again[0][:3] == again[0][3:] and again[1][:3] == again[1][3:]  # one decision per sentence


def test_span_views_keep_short_adjacent_spans_with_independent_lengths():
    import numpy as np

    from sts_lightning.embeddings.methods.ct.objective import split_views

    rng = np.random.default_rng(0)
    texts = [" ".join(f"w{i}_{j}" for j in range(6 + i % 40)) for i in range(400)]
    left, right = split_views(texts, texts, rng, span_words=6)
    for text, a, b in zip(texts, left, right, strict=True):
        assert 1 <= len(a.split()) <= 6 and 1 <= len(b.split()) <= 6
        assert f"{a} {b}" in text  # the words next to the cut, nothing skipped between the two spans
    lengths = np.array([[len(a.split()), len(b.split())] for a, b in zip(left, right, strict=True)])
    halves = np.array([[len(a.split()), len(b.split())] for a, b in zip(*split_views(texts, texts, rng), strict=True)])
    assert abs(np.corrcoef(lengths.T)[0, 1]) < 0.2 < np.corrcoef(halves.T)[0, 1]  # length no longer matches positives


def test_tension_is_symmetric_and_low_for_aligned_models():
    torch.manual_seed(0)
    a, b = torch.randn(6, 8), torch.randn(6, 8)
    assert in_batch_tension_loss(a, b).item() == pytest.approx(in_batch_tension_loss(b, a).item(), rel=1e-6)
    assert in_batch_tension_loss(a, a).item() < in_batch_tension_loss(a, b).item()
