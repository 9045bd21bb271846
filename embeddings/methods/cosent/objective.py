"""Objectives on scored sentence pairs (supervised STS), as pure functions on tensors, in float32.

Each takes both sides' embeddings ``(n, d)`` and gold scores ``(n,)`` in [0, 1] and equals the sentence-transformers
loss of its name; with ``gather`` every rank scores the GLOBAL batch (the update equals the single-device one).
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
    """AnglE's ``|cos(u_i, v_i) + sin(u_i, v_i)|``, each normalised vector read as complex (halves, odd sizes padded):
    sentence-transformers' ``util.pairwise_angle_sim`` closed form (after its fix #3223)."""
    if u.shape[-1] % 2:
        u, v = F.pad(u, (0, 1)), F.pad(v, (0, 1))
    u, v = F.normalize(u, p=2, dim=-1), F.normalize(v, p=2, dim=-1)
    re_u, im_u = u.chunk(2, dim=-1)
    re_v, im_v = v.chunk(2, dim=-1)
    return ((u * v).sum(-1) + (im_u * re_v - re_u * im_v).sum(-1)).abs()


@in_fp32
def ranking_loss(similarities: Tensor, scores: Tensor, scale: float = 20.0, gather: bool = True) -> Tensor:
    """CoSENT's ranking ``log(1 + sum_{y_i < y_j} exp(scale * (s_i - s_j)))`` over the (global) batch; only the
    order of ``scores`` matters."""
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
    """AnglE's in-batch negatives: each side of a ``positive`` pair picks its partner among the other 2n - 1
    sentences; a negative pair's rows add 0 but count in the mean (the authors' ``in_batch_negative_loss``)."""
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
    """AnglE's full objective (Li & Li 2023, Sec. 3): CoSENT + in-batch negatives + angle ranking, weighted, with
    the authors' defaults. In-batch positives are scores that truncate to a non-zero integer (their ``y_true.int()``)."""
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
