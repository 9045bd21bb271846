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

__all__ = ["angle_loss", "cosent_loss", "cosine_similarity_loss", "pairwise_angle_sim", "ranking_loss"]


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
