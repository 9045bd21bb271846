"""SBERT's NLI objectives (Reimers & Gurevych, EMNLP 2019) as pure functions on tensors.

The paper's classification objective: a softmax classifier over ``(u, v, |u - v|)`` of the two pooled
sentences, trained with cross-entropy (:func:`sbert_softmax_logits_input`, :func:`sbert_nli_loss`). Every row
is a self-contained pair, so under DDP each rank takes the mean over its own shard with no gather.

The later NLI recipe (``objective=mnrl``, sentence-transformers' ``training_nli_v2.py``) is the gathered
in-batch loss that CT's in-batch variant and SimCSE build on too, so it lives in
``embeddings.methods.shared.in_batch`` (``multiple_negatives_ranking_loss``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["sbert_nli_loss", "sbert_softmax_logits_input"]


def sbert_softmax_logits_input(u: Tensor, v: Tensor) -> Tensor:
    """Classifier features ``(u, v, |u - v|)`` of SBERT's NLI objective.

    Reimers & Gurevych (2019), Sec. 3, "Classification Objective Function": ``o = softmax(W_t (u, v,
    |u - v|))`` with ``W_t`` of shape ``(k, 3n)``. The paper's ablation (Sec. 6) found this
    concatenation best and ``u * v`` no help, so it is not offered. The order matches sentence-transformers'
    ``SoftmaxLoss`` so that its classifier weights can be loaded as is.

    Args:
        u: ``(batch, n)`` embeddings of the premises.
        v: ``(batch, n)`` embeddings of the hypotheses.

    Returns:
        ``(batch, 3n)`` features; the caller applies its ``nn.Linear(3n, 3)`` to get logits.
    """
    if u.shape != v.shape:
        raise ValueError(f"u and v must have the same shape, got {tuple(u.shape)} and {tuple(v.shape)}")
    return torch.cat([u, v, (u - v).abs()], dim=-1)


def sbert_nli_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean cross-entropy of the 3-way NLI classifier (Reimers & Gurevych 2019, Sec. 3).

    Args:
        logits: ``(batch, 3)`` raw classifier outputs (softmax is inside the loss, as in the paper's
            "optimize cross-entropy loss").
        labels: ``(batch,)`` integer classes (entailment / neutral / contradiction, any fixed order).

    Returns:
        Scalar mean loss over the batch.
    """
    return F.cross_entropy(logits, labels.long())

