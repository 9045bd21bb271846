"""AnglE's full objective (``objective.angle_full_loss``) against the authors' code, re-implemented here as the oracle.

Oracle: SeanLee97/AnglE, ``angle_emb/loss.py`` (``cosine_loss``, ``in_batch_negative_loss``, ``angle_loss``,
``categorical_crossentropy_loss``) and ``angle_emb/angle.py`` (``AngleLoss.__call__``, dataset format A), commit
5155458cfa6f7fbc7a8a19a66960cd86eadfd534 (v0.6.1, 2026-03-22); the three loss functions are those of f2ad9f8
(2023-10-20, the paper's time) less its optional duplicate-sentence ``similar_matrix``. Their layout is kept on
purpose: one "zigzag" batch ``[u0, v0, u1, v1, ...]`` with each pair's label on both of its rows, masks written as
``- 1e12``, the in-batch targets built by ``make_target_matrix`` from ``int`` labels, the angle by complex division.
Ours and theirs run on the same tiny BERT and batch: loss to 1e-5, every parameter's gradient equal.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from sts_lightning.embeddings.methods.cosent.objective import angle_full_loss, in_batch_negative_loss
from sts_lightning.lightning_modules.cosent import CoSENTModule
from tests.helpers import assert_same_gradients


# ------------------------------------------------------------------ the oracle: the authors' logic, their layout
def _their_ranking(labels, sims):
    lower = (labels[:, None] < labels[None, :]).float()
    diff = (sims[:, None] - sims[None, :] - (1 - lower) * 1e12).view(-1)
    return torch.logsumexp(torch.cat((torch.zeros(1), diff)), dim=0)


def their_cosine_loss(y_true, y_pred, tau):
    y_pred = F.normalize(y_pred, p=2, dim=1)
    return _their_ranking(y_true[::2, 0], torch.sum(y_pred[::2] * y_pred[1::2], dim=1) * tau)


def their_angle_loss(y_true, y_pred, tau):
    re_, im_ = torch.chunk(y_pred, 2, dim=1)
    a, b, c, d = re_[::2], im_[::2], re_[1::2], im_[1::2]
    z = torch.sum(c**2 + d**2, dim=1, keepdim=True)
    re, im = (a * c + b * d) / z, (b * c - a * d) / z  # (a + bi) / (c + di)
    dz, dw = torch.sum(a**2 + b**2, dim=1, keepdim=True) ** 0.5, torch.sum(c**2 + d**2, dim=1, keepdim=True) ** 0.5
    re, im = re / (dz / dw), im / (dz / dw)
    return _their_ranking(y_true[::2, 0], torch.abs(torch.sum(torch.cat((re, im), dim=1), dim=1)) * tau)


def their_in_batch_negative_loss(y_true, y_pred, tau):
    idxs = torch.arange(0, y_pred.shape[0]).int()
    labels = y_true.int()
    idxs_1 = idxs[None, :] * labels.T + (labels.T == 0).int() * -2
    idxs_2 = (idxs + 1 - idxs % 2 * 2)[:, None] * labels + (labels == 0).int() * -1
    target = (idxs_1 == idxs_2).float()
    y_pred = F.normalize(y_pred, dim=1, p=2)
    sims = (y_pred @ y_pred.T - torch.eye(y_pred.shape[0]) * 1e12) * tau
    return (-(F.log_softmax(sims, dim=1) * target).sum(dim=1)).mean()


def their_angle_loss_class(labels, outputs, cosine_w=1.0, ibn_w=1.0, angle_w=1.0, cosine_tau=20.0, ibn_tau=20.0,
                           angle_tau=1.0):
    loss = 0.0
    if cosine_w > 0:
        loss += cosine_w * their_cosine_loss(labels, outputs, cosine_tau)
    if ibn_w > 0:
        loss += ibn_w * their_in_batch_negative_loss(labels, outputs, ibn_tau)
    if angle_w > 0:
        loss += angle_w * their_angle_loss(labels, outputs, angle_tau)
    return loss


def zigzag(u, v, scores):
    """Their collator's batch: rows u0, v0, u1, v1, ...; labels ``(2n, 1)``, each pair's on both its rows."""
    return torch.stack((u, v), dim=1).reshape(-1, u.shape[1]), scores.repeat_interleave(2)[:, None]


# ------------------------------------------------------------------ the batches
S1 = ["a man plays a guitar .", "a dog runs in the park .", "a child reads a book .", "a girl rides a horse .",
      "two men play chess .", "a woman cuts an onion ."]
S2 = ["a man plays the piano .", "a dog is running in the park .", "two cats eat food .", "a boy rides a bike .",
      "two people play a game .", "a woman is cooking ."]
# scored pairs in [0, 1] (two of score 1: the in-batch positives) and NLI as their recipe reads it (1 / 0)
LABELS = {"scored": torch.tensor([0.64, 1.0, 0.04, 0.3, 1.0, 0.52]),
          "nli": torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0, 0.0])}
# their defaults, their BERT NLI recipe (examples/NLI/README.md: ibn_w 30, cosine_w 0, angle_w 1, angle_tau 20)
WEIGHTS = {"defaults": {}, "bert_nli_recipe": {"ibn_w": 30.0, "cosine_w": 0.0, "angle_w": 1.0, "angle_tau": 20.0}}


@pytest.fixture(scope="module")
def module(tiny_model_dir):
    return CoSENTModule(str(tiny_model_dir), max_length=32, objective="angle_full").eval()  # no dropout


def _loss_and_grads(module, loss_fn):
    module.zero_grad()
    u, v = module(S1, S2)
    loss = loss_fn(u, v)
    loss.backward()
    return loss.detach(), {k: p.grad.clone() for k, p in module.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("data", LABELS)
def test_equals_the_authors_angle_loss(module, data, weights, one_thread):
    scores, options = LABELS[data], WEIGHTS[weights]
    ours, our_grads = _loss_and_grads(module, lambda u, v: angle_full_loss(u, v, scores, gather=False, **options))
    theirs, their_grads = _loss_and_grads(module, lambda u, v: their_angle_loss_class(*zigzag(u, v, scores)[::-1],
                                                                                       **options))
    # fp32 sums of at most 2n x 2n = 144 terms of size <= 30 x 20: 1e-5 holds with room
    assert abs(ours.item() - theirs.item()) <= 1e-5 * max(1.0, abs(theirs.item())), (ours, theirs)
    assert_same_gradients(our_grads, their_grads)


def test_in_batch_term_by_hand():
    """Two pairs, the first positive: its two rows pick their partner among the 3 others; the negative pair's rows add
    0 but count in the mean over the 4 rows."""
    u, v = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([[1.0, 1.0], [-1.0, 0.0]])
    emb = F.normalize(torch.cat([u, v]), dim=-1)
    sims = emb @ emb.T
    def ce(row, target):
        others = [j for j in range(4) if j != row]
        return -(sims[row, target] - torch.logsumexp(sims[row, others], dim=0))
    by_hand = (ce(0, 2) + ce(2, 0)) / 4
    got = in_batch_negative_loss(u, v, torch.tensor([True, False]), scale=1.0)
    torch.testing.assert_close(got, by_hand)
