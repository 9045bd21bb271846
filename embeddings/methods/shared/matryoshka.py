"""Matryoshka representation learning (Kusupati et al. 2022, arXiv 2205.13147) around any one-vector loss.

sentence-transformers' ``MatryoshkaLoss`` (embeddings computed once) as a wrapper of the loss function, so the
GradCache path gets it too. Dimensions must be largest first (theirs sorts silently; another order is likely a typo).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch.nn.functional as F
from torch import Tensor

from sts_lightning.embeddings.methods.shared.matryoshka_options import (
    DIMS,
    WEIGHTS,
    check_matryoshka,
    check_matryoshka_fits,
    refuse_training_only_head,
    refused,
)

__all__ = ["DIMS", "WEIGHTS", "check_matryoshka", "check_matryoshka_fits", "matryoshka_loss",
           "refuse_training_only_head", "refused", "shrink"]


def shrink(embeddings: Tensor, dim: int) -> Tensor:
    """The leading ``dim`` numbers of each vector, L2-normalised (sentence-transformers' ``shrink``)."""
    return F.normalize(embeddings[..., :dim], p=2, dim=-1)


def matryoshka_loss(loss_fn: Callable[..., Tensor], dims: Sequence[int], weights: Sequence[float]
                    ) -> Callable[..., Tensor]:
    """``loss_fn`` of embedding tensors -> ``sum_k weights[k] * loss_fn(*(shrink(e, dims[k]) for e in embeddings))``."""
    def wrapped(*embeddings: Tensor) -> Tensor:
        total = None
        for dim, weight in zip(dims, weights, strict=True):
            if weight:
                term = weight * loss_fn(*(shrink(e, dim) for e in embeddings))
                total = term if total is None else total + term
        return total
    return wrapped
