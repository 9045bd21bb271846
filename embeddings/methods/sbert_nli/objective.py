"""SBERT's NLI classification objective (Reimers & Gurevych, EMNLP 2019) as pure functions on tensors.

A softmax classifier over ``(u, v, |u - v|)``, trained with cross-entropy; every row is a self-contained pair (no
DDP gather). The later recipe (``objective=mnrl``) is ``embeddings.methods.shared.in_batch``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["sbert_nli_loss", "sbert_softmax_logits_input"]


def sbert_softmax_logits_input(u: Tensor, v: Tensor) -> Tensor:
    """Classifier features ``(batch, 3n)`` = ``(u, v, |u - v|)`` of ``(batch, n)`` premises and hypotheses (Sec. 3).

    The order of sentence-transformers' ``SoftmaxLoss``, so its classifier weights load as they are.
    """
    if u.shape != v.shape:
        raise ValueError(f"u and v must have the same shape, got {tuple(u.shape)} and {tuple(v.shape)}")
    return torch.cat([u, v, (u - v).abs()], dim=-1)


def sbert_nli_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean cross-entropy of the 3-way NLI classifier: ``(batch, 3)`` logits, ``(batch,)`` integer labels."""
    return F.cross_entropy(logits, labels.long())

