"""Objectives on scored sentence pairs (supervised STS), as pure functions on tensors.

Each takes the embeddings of the two sides ``(n, d)`` and gold scores ``(n,)`` in [0, 1] and equals the
sentence-transformers loss class of the same name on the same embeddings (tests/embeddings/methods/
cosent/test_objective.py runs those classes):

* :func:`cosine_similarity_loss`: ``CosineSimilarityLoss`` (SBERT, Reimers & Gurevych 2019): mean squared
  error between ``cos(u, v)`` and the gold score. Row-separable: under DDP each rank takes the mean over its
  own rows and DDP's gradient average is the global mean (ranks hold equal batches).
* :func:`cosent_loss`: ``CoSENTLoss`` (Su 2022; Huang et al., TASLP 2024):
  ``log(1 + sum over pairs (i, j) with y_i < y_j of exp(scale * (cos_i - cos_j)))``: every pair scored
  above a pair with a higher gold score costs. Only the ORDER of the gold scores matters.
* :func:`angle_loss`: ``AnglELoss`` (Li & Li 2023, arXiv 2309.12871): the same ranking, with
  :func:`pairwise_angle_sim` in place of the cosine. (The paper trains AnglE together with a cosine and an
  in-batch-negatives term; this is the angle term alone, as sentence-transformers offers it.)
* :func:`angle_full_loss`: AnglE's whole objective (the authors' ``AngleLoss`` on format-A pairs):
  ``cosine_w * CoSENT(cosine_tau) + ibn_w * in-batch negatives(ibn_tau) + angle_w * angle ranking(angle_tau)``,
  see :func:`in_batch_negative_loss` for which pairs count as positives.

The two ranking losses compare every pair of pairs in the batch, so they are NOT row-separable and NOT a
mean over rows: with ``gather`` (the default) every rank gathers the n scalar similarities and scores of all
ranks (with gradients, ``gather_with_grad``) and computes the loss of the GLOBAL batch. Every rank then holds
the same loss; the gather's backward sums the ranks' gradients and DDP averages them, so the update equals
the single-device update on the global batch (a 2-rank test checks it). Without the gather a 2-GPU run
would rank only within each half batch: fewer pairs of pairs, a different objective from the 1-GPU run.

All of them run in float32 under bf16 / fp16 autocast (``in_fp32``): a cosine x 20 in bf16 is off by ~0.1.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from sts_lightning.embeddings.methods.shared.in_batch import gather_with_grad
from sts_lightning.embeddings.methods.shared.precision import in_fp32

__all__ = ["angle_full_loss", "angle_loss", "cosent_loss", "in_batch_negative_loss", "cosine_similarity_loss", "pairwise_angle_sim", "ranking_loss"]


def _check(u: Tensor, v: Tensor, scores: Tensor) -> None:
    if u.shape != v.shape or u.ndim != 2:
        raise ValueError(f"the two sides must be (n, d) of one shape, got {tuple(u.shape)} and {tuple(v.shape)}")
    if scores.shape != (u.shape[0],):
        raise ValueError(f"expected {u.shape[0]} gold scores (one per pair), got shape {tuple(scores.shape)}")


@in_fp32
def cosine_similarity_loss(u: Tensor, v: Tensor, scores: Tensor) -> Tensor:
    """``mean((cos(u_i, v_i) - y_i)^2)``: regress the cosine onto the gold score in [0, 1]."""
    _check(u, v, scores)
    return F.mse_loss(F.cosine_similarity(u, v, dim=-1), scores.float())


def pairwise_angle_sim(u: Tensor, v: Tensor) -> Tensor:
    """AnglE's similarity of row ``i`` of ``u`` and ``v``: ``|cos(u_i, v_i) + sin(u_i, v_i)|``.

    Each vector is read as a complex vector (first half real, second half imaginary, an odd dimension padded
    with a zero) after L2 normalisation; ``cos + sin`` is the real plus the imaginary part of
    ``sum(u_k * conj(v_k))``, the authors' reference code in sentence-transformers' closed form
    (``util.pairwise_angle_sim`` since its fix #3223: no normalisation over the batch dimension).
    """
    if u.shape[-1] % 2:
        u, v = F.pad(u, (0, 1)), F.pad(v, (0, 1))
    u, v = F.normalize(u, p=2, dim=-1), F.normalize(v, p=2, dim=-1)
    re_u, im_u = u.chunk(2, dim=-1)
    re_v, im_v = v.chunk(2, dim=-1)
    return ((u * v).sum(-1) + (im_u * re_v - re_u * im_v).sum(-1)).abs()


@in_fp32
def ranking_loss(similarities: Tensor, scores: Tensor, scale: float = 20.0, gather: bool = True) -> Tensor:
    """CoSENT's ranking: ``log(1 + sum_{y_i < y_j} exp(scale * (s_i - s_j)))`` over the (global) batch.

    Args:
        similarities: ``(n,)`` predicted similarity of each pair (differentiable).
        scores: ``(n,)`` gold scores; only their order matters, ties add nothing.
        scale: inverse temperature (sentence-transformers' 20).
        gather: under DDP, rank the pairs of all ranks together (see the module docstring).
    """
    if similarities.shape != scores.shape or similarities.ndim != 1:
        raise ValueError(f"similarities and scores must be (n,) of one shape, got {tuple(similarities.shape)} "
                         f"and {tuple(scores.shape)}")
    if gather:
        similarities, scores = gather_with_grad(similarities)[0], gather_with_grad(scores.float())[0]
    s = similarities * scale
    lower = scores[:, None] < scores[None, :]  # pair i has a lower gold score than pair j
    diff = (s[:, None] - s[None, :]).masked_fill(~lower, float("-inf"))
    return torch.logsumexp(torch.cat([s.new_zeros(1), diff.flatten()]), dim=0)


@in_fp32
def cosent_loss(u: Tensor, v: Tensor, scores: Tensor, scale: float = 20.0, gather: bool = True) -> Tensor:
    """``CoSENTLoss``: :func:`ranking_loss` over ``cos(u_i, v_i)``."""
    _check(u, v, scores)
    return ranking_loss(F.cosine_similarity(u, v, dim=-1), scores, scale=scale, gather=gather)


@in_fp32
def angle_loss(u: Tensor, v: Tensor, scores: Tensor, scale: float = 20.0, gather: bool = True) -> Tensor:
    """``AnglELoss``: :func:`ranking_loss` over :func:`pairwise_angle_sim`."""
    _check(u, v, scores)
    return ranking_loss(pairwise_angle_sim(u, v), scores, scale=scale, gather=gather)


@in_fp32
def in_batch_negative_loss(u: Tensor, v: Tensor, positive: Tensor, scale: float = 20.0) -> Tensor:
    """AnglE's in-batch negatives: each side of a positive pair must pick its partner among all 2n sentences.

    The 2n vectors ``[u; v]`` are compared by cosine x ``scale``, a sentence never with itself; a row whose pair
    is positive is the cross-entropy of its partner, a row of a negative pair adds 0 but still counts in the mean
    over the 2n rows (the authors' ``in_batch_negative_loss``: ``categorical_crossentropy(...).mean()``). The
    sentences of negative pairs stay in every row's candidates. No gather here: :func:`angle_full_loss` gathers
    once for its three terms.

    Args:
        u, v: ``(n, d)`` the two sides of the pairs.
        positive: ``(n,)`` bool, which pairs are positives (their code: ``int(label) != 0``).
        scale: inverse temperature (their ``ibn_tau``, 20).
    """
    n = u.shape[0]
    emb = F.normalize(torch.cat([u, v]), p=2, dim=-1)
    itself = torch.eye(2 * n, dtype=torch.bool, device=emb.device)
    sims = (emb @ emb.T * scale).masked_fill(itself, float("-inf"))
    partner = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(u.device)
    picked = torch.log_softmax(sims, dim=-1).gather(1, partner[:, None])[:, 0]
    return -(picked * positive.repeat(2).to(picked.dtype)).sum() / (2 * n)


@in_fp32
def angle_full_loss(u: Tensor, v: Tensor, scores: Tensor, *, cosine_w: float = 1.0, ibn_w: float = 1.0,
                    angle_w: float = 1.0, cosine_tau: float = 20.0, ibn_tau: float = 20.0, angle_tau: float = 1.0,
                    gather: bool = True) -> Tensor:
    """AnglE's full objective (Li & Li 2023, Sec. 3): CoSENT + in-batch negatives + angle ranking, weighted.

    The defaults are the authors' (``w1 = w2 = w3 = 1``, ``cosine_tau = ibn_tau = 20``, ``angle_tau = 1``:
    ``AngleLoss`` when the paper appeared and ``examples/NLI/train_nli.py`` still). A term of weight 0 is skipped,
    as theirs is. Positives of the in-batch term are the pairs whose gold score truncates to a non-zero integer,
    as their ``make_target_matrix`` reads labels (``y_true.int()``): with scores in [0, 1] (``data=scored_pairs``)
    that is a score of 1, e.g. NLI read as ``entailment = 1, contradiction = 0`` (their recipe; see
    ``datamodules.scored_pair_readers``); the two ranking terms use only the order of the scores.
    With ``gather`` (DDP) the three terms see the global batch, as :func:`ranking_loss` does.
    """
    _check(u, v, scores)
    if gather:
        u, v, scores = gather_with_grad(u)[0], gather_with_grad(v)[0], gather_with_grad(scores.float())[0]
    loss = u.new_zeros(())
    if cosine_w > 0:
        loss = loss + cosine_w * ranking_loss(F.cosine_similarity(u, v, dim=-1), scores, cosine_tau, gather=False)
    if ibn_w > 0:
        loss = loss + ibn_w * in_batch_negative_loss(u, v, scores.int() != 0, ibn_tau)
    if angle_w > 0:
        loss = loss + angle_w * ranking_loss(pairwise_angle_sim(u, v), scores, angle_tau, gather=False)
    return loss
