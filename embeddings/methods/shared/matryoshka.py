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
from itertools import pairwise

import torch.nn.functional as F
from torch import Tensor

from sts_lightning.embeddings.errors import ConfigError

__all__ = ["check_matryoshka", "check_matryoshka_fits", "matryoshka_loss", "refuse_training_only_head", "shrink"]

DIMS, WEIGHTS = "model.matryoshka_dims", "model.matryoshka_weights"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_matryoshka(dims: Sequence[int] | None, weights: Sequence[float] | None
                     ) -> tuple[tuple[int, ...], tuple[float, ...]] | None:
    """``(dims, weights)`` as tuples (weights default to 1), ``None`` without dims; one ``ConfigError`` line naming
    the key otherwise. No model needed: ``check_matryoshka_fits`` compares with the embedding size once it is known."""
    if dims is None:
        if weights is not None:
            raise ConfigError(f"{WEIGHTS}={list(weights)!r} is set without {DIMS}: give the dimensions they weigh")
        return None
    if isinstance(dims, str | int) or not len(dims):
        raise ConfigError(f"{DIMS}={dims!r} must be a non-empty list of dimensions, largest first, e.g. [384,128,64]")
    dims = list(dims)
    if not all(_is_int(d) and d > 0 for d in dims):
        raise ConfigError(f"{DIMS}={dims!r} must hold integers > 0")
    if any(a <= b for a, b in pairwise(dims)):
        raise ConfigError(f"{DIMS}={dims!r} must be strictly decreasing (largest first, no repeats), "
                          f"e.g. {sorted(set(dims), reverse=True)}")
    if weights is None:
        return tuple(dims), (1.0,) * len(dims)
    if isinstance(weights, str | int | float) or len(weights) != len(dims):
        raise ConfigError(f"{WEIGHTS}={weights!r} must hold one weight per dimension of {DIMS}={dims!r}")
    if not all(isinstance(w, int | float) and not isinstance(w, bool) and w >= 0 for w in weights) or \
            not any(weights):
        raise ConfigError(f"{WEIGHTS}={list(weights)!r} must be numbers >= 0, not all 0")
    return tuple(dims), tuple(float(w) for w in weights)


def check_matryoshka_fits(dims: Sequence[int], embedding_dim: int) -> None:
    """A dimension larger than the model's embedding: one ``ConfigError`` line naming the key and the size."""
    if dims[0] > embedding_dim:
        raise ConfigError(f"{DIMS}={list(dims)!r}: {dims[0]} is larger than the model's embedding dimension "
                          f"{embedding_dim}")


def refuse_training_only_head(dims: Sequence[int] | None, key: str, value: str, fix: str) -> None:
    """One ``ConfigError`` line when ``dims`` is set and the loss reads a head that the export drops (``key=value``).

    Why: ``shrink`` cuts the vector the loss sees. Behind a training-only head (SimCSE's ``mlp=train``, PromptBERT's
    ``head=mlp``) that is the head's output, a dense function of every number of the pooled vector, so the exported
    vector's prefixes would get no Matryoshka training at all while the option looked accepted. A prefix cannot go
    through the head either (it reads the whole vector). ``fix``: the setting that trains the exported vector.
    """
    if dims is not None:
        raise ConfigError(f"{DIMS} with {key}={value}: that head is used in training only and the export drops it, "
                          f"so the prefixes trained would be the head's output, not the exported vector's; set {fix}")


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
