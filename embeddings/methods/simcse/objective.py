"""SimCSE's objective (Gao, Yao & Chen, EMNLP 2021): ``cl_forward`` of princeton-nlp/SimCSE, the shared in-batch
scores at scale ``1 / temperature``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from sts_lightning.embeddings.methods.shared.in_batch import in_batch_scores
from sts_lightning.embeddings.methods.shared.precision import in_fp32

__all__ = ["simcse_loss"]


@in_fp32
def simcse_loss(view1: Tensor, view2: Tensor, hard_negatives: Tensor | None = None, temperature: float = 0.05,
                hard_negative_weight: float = 0.0, gather: bool = True) -> Tensor:
    """Row ``i`` of ``view1`` must pick row ``i`` of ``view2`` among the global batch's candidates, by cosine /
    ``temperature``. Supervised: ``hard_negative_weight`` is added to each anchor's OWN hard-negative logit. Unlike
    ``cl_forward`` (detached gather), candidates are gathered WITH gradients: exactly the single-device gradient."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if hard_negatives is not None and hard_negatives.shape != view1.shape:
        raise ValueError(f"hard_negatives must hold one row per anchor: {tuple(hard_negatives.shape)} vs "
                         f"{tuple(view1.shape)}")
    scores, targets, positives_global = in_batch_scores(view1, view2, hard_negatives, 1.0 / temperature, gather)
    if hard_negatives is not None and hard_negative_weight:
        bonus = torch.zeros_like(scores)
        bonus[torch.arange(len(targets), device=scores.device), positives_global + targets] = hard_negative_weight
        scores = scores + bonus
    return F.cross_entropy(scores, targets)
