"""SimCSE's objective (Gao, Yao & Chen, EMNLP 2021) as a pure function on tensors.

InfoNCE over two dropout views of each sentence (unsupervised) or over NLI triplets (supervised, with a hard
negative per anchor): ``cl_forward`` of princeton-nlp/SimCSE, the same scores as the shared gathered in-batch
loss (``embeddings.methods.shared.in_batch``) at scale ``1 / temperature``, plus the supervised recipe's
``hard_negative_weight`` added to each anchor's own hard-negative logit.
"""

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
    """SimCSE's contrastive objective: row ``i`` of ``view1`` must pick row ``i`` of ``view2`` among all candidates
    of the global batch, by cosine / ``temperature``; the mean over this rank's anchors.

    Unsupervised: the same sentences under two dropout masks. Supervised: ``hard_negatives`` (row ``i`` belongs to
    anchor ``i``), ``hard_negative_weight`` added to each anchor's OWN hard-negative logit (``cl_forward``; default 0,
    the paper's best). Unlike ``cl_forward`` (detached gather), candidates are gathered WITH gradients, so DDP's
    average gives exactly the single-device gradient of the global batch.
    """
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
