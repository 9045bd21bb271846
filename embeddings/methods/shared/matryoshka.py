"""Matryoshka representation learning (Kusupati et al. 2022, arXiv 2205.13147) around any one-vector loss.

``model.matryoshka_dims=[384, 256, 128, 64]`` trains the leading 384, 256, 128 and 64 numbers of the sentence
vector to be embeddings on their own: the method's loss is applied to each truncated, re-normalised prefix and
the results are summed with ``model.matryoshka_weights`` (default 1 each). This is sentence-transformers'
``MatryoshkaLoss`` (``losses/matryoshka.py``: ``shrink`` = prefix + L2 normalisation, weighted sum over the
dimensions): the embeddings are computed once and every dimension reuses them, as its ``ForwardDecorator``
caches the forward pass. A test runs their class beside ours on one tiny model.

Why a loss wrapper on tensors: every one-vector method already computes its loss as a pure function of the
embeddings (``EncoderModule.embed_and_loss``'s ``loss_fn``, CoSENT's ``loss(u, v, scores)``); wrapping that one
function gives the cached (GradCache) path too, since the cache differentiates through whatever ``loss_fn`` is.

Unlike sentence-transformers, the dimensions must be written largest first without repeats (theirs sorts them
silently): a list in another order is more likely a typo than a wish, and the evaluation columns follow it.
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
