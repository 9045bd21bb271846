"""Objectives with in-batch negatives, and the DDP gather they need (pure functions on tensors).

Kept apart from ``losses.py`` because these objectives are NOT row-separable: every anchor is scored
against every candidate of the batch, so under DDP the candidates of all ranks must be gathered (with
gradients) for the loss to equal the single-device loss on the global batch.

* :func:`multiple_negatives_ranking_loss`: sentence-transformers' ``MultipleNegativesRankingLoss``
  (Henderson et al. 2017), the NLI objective of SBERT's later recipe (``training_nli_v2.py``): premise as
  anchor, its entailed hypothesis as the positive, a contradicted hypothesis of the same premise as a hard
  negative, every other candidate of the (global) batch as a further negative; cosine similarity x scale.
* :func:`in_batch_tension_loss`: Contrastive Tension with in-batch negatives (sentence-transformers'
  ``ContrastiveTensionLossInBatchNegatives``, from the CT authors): model 1 and model 2 embed the same
  sentences; the diagonal of their scaled cosine matrix is the positive, symmetric cross-entropy.
* :func:`simcse_loss`: SimCSE's InfoNCE (Gao et al. 2021, ``cl_forward`` of princeton-nlp/SimCSE): the
  same scores at scale ``1 / temperature``, plus the supervised recipe's ``hard_negative_weight`` added to
  each anchor's own hard-negative logit.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from sts_lightning.lightning_modules.losses import in_fp32

__all__ = ["gather_with_grad", "in_batch_tension_loss", "multiple_negatives_ranking_loss", "simcse_loss"]


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather_with_grad(x: Tensor) -> tuple[Tensor, int]:
    """All ranks' ``x`` concatenated along dim 0 (rank order), gradients flowing back to every rank.

    Why ``torch.distributed.nn.all_gather`` and not ``dist.all_gather``: the latter returns detached
    copies, so the other ranks' candidates would act as constants and the gradient would differ from the
    single-device loss. Its backward sums the incoming gradients across ranks; together with DDP's average
    over ranks the update equals that of the mean per-rank loss. Ranks must hold equal-sized ``x`` (the
    DataModules pad every rank to the same number of equal batches).

    Returns:
        ``(gathered, offset)``: the concatenation and the row where this rank's own ``x`` starts.
    """
    rank, world = _world()
    if world == 1:
        return x, 0
    from torch.distributed.nn.functional import all_gather

    return torch.cat(all_gather(x.contiguous()), dim=0), rank * x.shape[0]


def _in_batch_scores(anchors: Tensor, positives: Tensor, negatives: Tensor | None, scale: float,
                     gather: bool) -> tuple[Tensor, Tensor, int]:
    """``(scores, targets, positives_global)``: scaled cosines of this rank's anchors against
    ``[positives; negatives]`` of every rank (``gather``), the column of each anchor's own positive, and
    how many positive columns there are (the hard negatives' columns start there)."""
    if anchors.shape != positives.shape:
        raise ValueError(f"anchors and positives differ in shape: {tuple(anchors.shape)} vs {tuple(positives.shape)}")
    n = anchors.shape[0]
    pos, offset = gather_with_grad(positives) if gather else (positives, 0)
    parts = [pos]
    if negatives is not None:
        parts.append(gather_with_grad(negatives)[0] if gather else negatives)
    candidates = torch.cat(parts, dim=0)
    scores = F.normalize(anchors, dim=-1) @ F.normalize(candidates, dim=-1).T * scale
    targets = torch.arange(offset, offset + n, device=anchors.device)
    return scores, targets, pos.shape[0]


@in_fp32
def multiple_negatives_ranking_loss(anchors: Tensor, positives: Tensor, negatives: Tensor | None = None,
                                    scale: float = 20.0, gather: bool = True) -> Tensor:
    """Cross-entropy of each anchor over all candidates, its own positive being the target.

    Candidates are ``[positives; negatives]`` (of every rank when ``gather``), compared by cosine x
    ``scale`` (sentence-transformers' default 20, i.e. temperature 0.05).

    Args:
        anchors: ``(n, d)`` premise embeddings.
        positives: ``(n, d)`` embeddings of the entailed hypotheses (row ``i`` belongs to anchor ``i``).
        negatives: optional ``(n, d)`` hard negatives (contradictions); any further rows are fine too.
        scale: inverse temperature.
        gather: under DDP, score against the candidates of all ranks (the global batch).

    Returns:
        Scalar mean loss over this rank's anchors.
    """
    scores, targets, _ = _in_batch_scores(anchors, positives, negatives, scale, gather)
    return F.cross_entropy(scores, targets)


@in_fp32
def simcse_loss(view1: Tensor, view2: Tensor, hard_negatives: Tensor | None = None, temperature: float = 0.05,
                hard_negative_weight: float = 0.0, gather: bool = True) -> Tensor:
    """SimCSE's contrastive objective: row ``i`` of ``view1`` must pick row ``i`` of ``view2`` among all
    candidates of the global batch, by cosine / ``temperature``.

    Unsupervised SimCSE passes the same sentences twice (two dropout masks): ``view1`` / ``view2`` are the two
    passes, and this is ``multiple_negatives_ranking_loss(view1, view2, scale=1 / temperature)`` (no symmetric
    term, as ``cl_forward``). Supervised SimCSE: premise, entailed hypothesis, contradicted hypothesis of the
    same premise (``hard_negatives``, row ``i`` belongs to anchor ``i``).

    ``hard_negative_weight`` is added to the logit of each anchor's OWN hard negative only (``cl_forward``'s
    ``weights``: "logits of weights"; the paper's ablation found 0 best, so that is the default). The other
    anchors' hard negatives stay plain negatives.

    DDP differs from ``cl_forward`` on purpose: it gathers detached copies and every rank scores all anchors,
    so the gradient is ``1 / world_size`` of the single-device one; here each rank scores its own anchors
    against gathered candidates WITH gradients (``gather_with_grad``), and DDP's average gives exactly the
    single-device gradient of the global batch.

    Returns:
        Scalar mean loss over this rank's anchors.
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if hard_negatives is not None and hard_negatives.shape != view1.shape:
        raise ValueError(f"hard_negatives must hold one row per anchor: {tuple(hard_negatives.shape)} vs "
                         f"{tuple(view1.shape)}")
    scores, targets, positives_global = _in_batch_scores(view1, view2, hard_negatives, 1.0 / temperature, gather)
    if hard_negatives is not None and hard_negative_weight:
        bonus = torch.zeros_like(scores)
        bonus[torch.arange(len(targets), device=scores.device), positives_global + targets] = hard_negative_weight
        scores = scores + bonus
    return F.cross_entropy(scores, targets)


def in_batch_tension_loss(emb1: Tensor, emb2: Tensor, scale: float = 20.0, gather: bool = True) -> Tensor:
    """Symmetric in-batch Contrastive Tension: ``(CE(S) + CE(S^T)) / 2`` over ``S = cos(emb1, emb2) x scale``.

    Row ``i`` of both inputs is the same sentence (model 1 vs model 2), so the target of row ``i`` is
    column ``i``; every other sentence of the global batch is a negative.
    """
    if emb1.shape != emb2.shape:
        raise ValueError(f"emb1 and emb2 differ in shape: {tuple(emb1.shape)} vs {tuple(emb2.shape)}")
    return (multiple_negatives_ranking_loss(emb1, emb2, scale=scale, gather=gather)
            + multiple_negatives_ranking_loss(emb2, emb1, scale=scale, gather=gather)) / 2
