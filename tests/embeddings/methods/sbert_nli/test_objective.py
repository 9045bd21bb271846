"""SBERT-NLI's softmax objective (embeddings.methods.sbert_nli.objective): by hand and against
sentence-transformers' SoftmaxLoss on a tiny model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sts_lightning.embeddings.methods.sbert_nli.objective import sbert_nli_loss, sbert_softmax_logits_input
from tests.helpers import WORDS

CORPUS = [f"{a} {b} {c} ." for a, b, c in zip(WORDS[::3], WORDS[1::3], WORDS[2::3], strict=False)]


def test_sbert_features_and_loss_by_hand():
    u = torch.tensor([[1.0, -2.0], [0.5, 0.0]])
    v = torch.tensor([[3.0, 1.0], [0.5, -1.0]])
    feats = sbert_softmax_logits_input(u, v)
    assert feats.tolist() == [[1.0, -2.0, 3.0, 1.0, 2.0, 3.0], [0.5, 0.0, 0.5, -1.0, 0.0, 1.0]]
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.0, 1.0, 1.0]])
    labels = torch.tensor([0, 2])
    e = torch.e
    by_hand = -(np.log(e**2 / (e**2 + 1 + e**-1)) + np.log(e / (1 + 2 * e))) / 2
    assert sbert_nli_loss(logits, labels).item() == pytest.approx(by_hand, abs=1e-6)
    with pytest.raises(ValueError, match="same shape"):
        sbert_softmax_logits_input(u, v[:, :1])


def test_sbert_matches_sentence_transformers_softmax_loss(st_model):
    from sentence_transformers.sentence_transformer.losses import SoftmaxLoss

    dim = st_model.get_embedding_dimension()
    torch.manual_seed(0)
    theirs = SoftmaxLoss(st_model, dim, num_labels=3)
    classifier = torch.nn.Linear(3 * dim, 3)
    classifier.load_state_dict(theirs.classifier.state_dict())
    features = [st_model.preprocess(CORPUS[:4]), st_model.preprocess(CORPUS[4:8])]
    labels = torch.tensor([0, 1, 2, 1])
    with torch.no_grad():
        (u, v), their_logits = theirs(features, None)
        their_loss = theirs(features, labels)
        our_logits = classifier(sbert_softmax_logits_input(u, v))
        torch.testing.assert_close(our_logits, their_logits, rtol=0, atol=1e-6)
        torch.testing.assert_close(sbert_nli_loss(our_logits, labels), their_loss, rtol=0, atol=1e-6)
