"""RankCSE's objective (Liu et al., ACL 2023): SimCSE's InfoNCE plus ranking distillation (``gamma``: ListNet or
ListMLE of the teachers' in-batch lists) and ranking consistency (``beta``: JSD of the two views' lists).

As perceptiveshawty/RankCSE at 17c5226, but its ``Divergence`` clamps the log-mixture to the constant 1e-7, so it
trains minus the mean entropy: ``consistency="repo"`` is that formula, ``"jsd"`` (default) the paper's divergence.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from sts_lightning.embeddings.methods.rankcse import CONSISTENCY, RANKING_LOSSES
from sts_lightning.embeddings.methods.shared.in_batch import gather_with_grad
from sts_lightning.embeddings.methods.shared.precision import in_fp32

__all__ = ["CONSISTENCY", "RANKING_LOSSES", "consistency_loss", "listmle_loss", "listnet_loss", "pair_teacher_list",
           "rankcse_loss", "teacher_scores"]

LISTMLE_EPS = 1e-7  # the repository's eps inside ListMLE's log
PROB_FLOOR = 1e-7  # the repository's clamp of both lists' probabilities in the consistency term


def _own_columns(scores: Tensor, offset: int) -> Tensor:
    """Boolean ``(n, N)``: row ``i``'s own positive, column ``offset + i`` (this rank's rows of the global list)."""
    rows = torch.arange(scores.shape[0], device=scores.device)
    mask = torch.zeros_like(scores, dtype=torch.bool)
    mask[rows, rows + offset] = True
    return mask


@in_fp32
def teacher_scores(teachers: Sequence[Tensor], weights: Sequence[float], temperature: float, offset: int = 0,
                   rows: int | None = None) -> Tensor:
    """The teachers' combined list ``sum_k w_k cos(T_k[rows], T_k) / temperature`` (weights normalised) of the global
    batch's ``(N, d_k)`` vectors; this rank's anchors are rows ``offset .. offset + rows`` (default: all)."""
    if len(teachers) != len(weights) or not teachers:
        raise ValueError(f"{len(teachers)} teachers but {len(weights)} weights")
    total = float(sum(weights))
    out = None
    for vectors, weight in zip(teachers, weights, strict=True):
        unit = F.normalize(vectors.float(), dim=-1)
        anchors = unit[offset:offset + (rows if rows is not None else unit.shape[0])]
        part = anchors @ unit.T * (float(weight) / total / temperature)
        out = part if out is None else out + part
    return out


def pair_teacher_list(scorer, anchors: Sequence[str], batch: Sequence[str]) -> Tensor:
    """A pair teacher's (a cross-encoder's) list: ``(len(anchors), len(batch))`` scores of every (anchor, sentence)
    pair of the global batch, read jointly: the vector teachers' ``cos(T[i], T[j])`` where the teacher has no
    vectors. ``len(anchors) x len(batch)`` forward passes a step: batch 64 on one device is 4,096 pairs."""
    first = [a for a in anchors for _ in batch]
    second = [b for _ in anchors for b in batch]
    return scorer.score_pairs(first, second).float().view(len(anchors), len(batch))


def listnet_loss(teacher: Tensor, student: Tensor, offset: int = 0) -> Tensor:
    """ListNet: ``-sum_j q_ij log p_ij`` averaged over rows, own positive left out of both distributions."""
    own = _own_columns(student, offset)
    log_p = F.log_softmax(student.masked_fill(own, float("-inf")), dim=-1)
    q = F.softmax(teacher.masked_fill(own, float("-inf")), dim=-1)
    return -(q * log_p.masked_fill(own, 0.0)).sum() / q.sum()


def listmle_loss(teacher: Tensor, student: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """ListMLE: minus the Plackett-Luce log-likelihood of the teacher's order under the student's scores; columns
    are shuffled before the sort so ties fall at random."""
    perm = torch.randperm(student.shape[-1], generator=generator, device=generator.device if generator else "cpu")
    perm = perm.to(student.device)
    _, order = teacher[:, perm].sort(descending=True, dim=-1)
    ranked = torch.gather(student[:, perm], 1, order)
    ranked = ranked - ranked.max(dim=1, keepdim=True).values
    tails = torch.cumsum(ranked.exp().flip(dims=[1]), dim=1).flip(dims=[1])
    return (torch.log(tails + LISTMLE_EPS) - ranked).sum(dim=1).mean()


def consistency_loss(forward: Tensor, backward: Tensor, kind: str = "jsd") -> Tensor:
    """Agreement of the two views' lists (rows: softmax over candidates), mean over rows: ``jsd`` or ``repo``."""
    p = F.softmax(forward, dim=-1).clamp(min=PROB_FLOOR)
    q = F.softmax(backward, dim=-1).clamp(min=PROB_FLOOR)
    n = forward.shape[0]
    if kind == "repo":
        return 0.5 * ((p * (p.log() - PROB_FLOOR)).sum() + (q * (q.log() - PROB_FLOOR)).sum()) / n
    log_m = (0.5 * (p + q)).log()
    return 0.5 * ((p * (p.log() - log_m)).sum() + (q * (q.log() - log_m)).sum()) / n


@in_fp32
def rankcse_loss(view1: Tensor, view2: Tensor, teacher: Tensor, *, temperature: float = 0.05,
                 ranking_loss: str = "listmle", gamma: float = 1.0, beta: float = 1.0, consistency: str = "jsd",
                 rank_temperature: float | None = None, gather: bool = True,
                 generator: torch.Generator | None = None) -> dict[str, Tensor]:
    """InfoNCE + ``beta`` x ranking consistency + ``gamma`` x ranking distillation (the repository's ``cl_forward``)
    of this rank's ``(n, d)`` views against its ``(n, N)`` rows of ``teacher_scores``; the terms come unweighted."""
    z2, offset = gather_with_grad(view2) if gather else (view2, 0)
    z1 = gather_with_grad(view1)[0] if gather else view1
    u1, u2 = F.normalize(view1, dim=-1), F.normalize(view2, dim=-1)
    cosines = u1 @ F.normalize(z2, dim=-1).T
    logits = cosines / temperature
    targets = torch.arange(offset, offset + view1.shape[0], device=view1.device)
    infonce = F.cross_entropy(logits, targets)
    backward = u2 @ F.normalize(z1, dim=-1).T / temperature
    agree = consistency_loss(logits, backward, consistency)
    student = logits if rank_temperature is None else cosines / rank_temperature
    teacher = teacher.to(device=student.device, dtype=student.dtype)
    if teacher.shape != student.shape:
        raise ValueError(f"the teachers' list is {tuple(teacher.shape)}, the student's {tuple(student.shape)}")
    distill = (listnet_loss(teacher, student, offset) if ranking_loss == "listnet"
               else listmle_loss(teacher, student, generator))
    loss = infonce + beta * agree + gamma * distill
    return {"loss": loss, "infonce": infonce, "consistency": agree, "distillation": distill}
