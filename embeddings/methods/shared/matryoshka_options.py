"""The values of ``model.matryoshka_dims`` / ``model.matryoshka_weights``, checked without torch: the config check
and the constructors refuse a bad value with the same line."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from sts_lightning.embeddings.errors import ConfigError

__all__ = ["DIMS", "WEIGHTS", "check_matryoshka", "check_matryoshka_fits", "refuse_training_only_head", "refused"]

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


def refused(method: str, why: str) -> ConfigError:
    """The line for a method that does not take Matryoshka (its class's ``matryoshka_refused`` says why)."""
    return ConfigError(f"{DIMS} is not allowed: {method} {why}")


def check_matryoshka_fits(dims: Sequence[int], embedding_dim: int) -> None:
    """A dimension larger than the model's embedding: one ``ConfigError`` line naming the key and the size."""
    if dims[0] > embedding_dim:
        raise ConfigError(f"{DIMS}={list(dims)!r}: {dims[0]} is larger than the model's embedding dimension "
                          f"{embedding_dim}")


def refuse_training_only_head(dims: Sequence[int] | None, head: tuple[str, str, str] | None, value: object) -> None:
    """Refuse ``dims`` when the loss reads a ``training_only_head`` ``(option, value, fix)`` the export drops (SimCSE's
    ``mlp=train``): the exported prefixes would get no Matryoshka training."""
    if dims is not None and head is not None and value == head[1]:
        key, fix = f"model.{head[0]}", head[2]
        raise ConfigError(f"{DIMS} with {key}={value}: that head is used in training only and the export drops it, "
                          f"so the prefixes trained would be the head's output, not the exported vector's; set {fix}")
