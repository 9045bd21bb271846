"""The in-batch loss several methods share, its candidates gathered with gradients from all DDP ranks (each rank's
targets offset), so it equals the single-device loss on the global batch."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from sts_lightning.embeddings.methods.shared.precision import in_fp32

__all__ = ["gather_with_grad", "in_batch_scores", "multiple_negatives_ranking_loss"]


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather_with_grad(x: Tensor) -> tuple[Tensor, int]:
    """``(gathered, offset)``: all ranks' equal-sized ``x`` in rank order, and the row where this rank's starts.
    ``torch.distributed.nn.all_gather``, not ``dist.all_gather`` (detached copies): gradients flow back to every rank."""
    rank, world = _world()
    if world == 1:
        return x, 0
    from torch.distributed.nn.functional import all_gather

    return torch.cat(all_gather(x.contiguous()), dim=0), rank * x.shape[0]


def gather_sentences(sentences: list[str]) -> list[str]:
    """Every rank's sentences in rank order (the order ``gather_with_grad`` gives their vectors): what a pair teacher
    reads against this rank's anchors."""
    rank, world = _world()
    if world == 1:
        return sentences
    import torch.distributed as dist

    parts: list = [None] * world
    dist.all_gather_object(parts, sentences)
    return [s for part in parts for s in part]


def in_batch_scores(anchors: Tensor, positives: Tensor, negatives: Tensor | None, scale: float,
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
    """sentence-transformers' ``MultipleNegativesRankingLoss``: cross-entropy of each anchor over the candidates
    ``[positives; negatives]`` by cosine x ``scale``, its own positive being the target."""
    scores, targets, _ = in_batch_scores(anchors, positives, negatives, scale, gather)
    return F.cross_entropy(scores, targets)
