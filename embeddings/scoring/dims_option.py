"""``evaluate.py dims=[...]`` / ``sts_lightning.load(dim=)`` checked without torch, so ``runs/config_checks.py``
refuses ``dims=[0]`` before ``evaluate.py`` imports torch (the ``truncated`` scorer re-exports it)."""

from __future__ import annotations

from collections.abc import Sequence

from sts_lightning.embeddings.errors import ConfigError

__all__ = ["check_dims"]


def check_dims(dims: object, key: str = "dims") -> tuple[int, ...]:
    """``dims`` (``null``, one integer or a list of them) as a tuple of distinct integers > 0; one ``ConfigError``
    line naming ``key`` otherwise (checked before any model loads)."""
    if dims is None:
        return ()
    values = [dims] if isinstance(dims, int) and not isinstance(dims, bool) else dims
    if isinstance(values, str) or not isinstance(values, Sequence) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in values):
        raise ConfigError(f"{key}={dims!r} must be a list of integers > 0, e.g. [384,128,64] (null: full vectors only)")
    if len(set(values)) != len(values):
        raise ConfigError(f"{key}={list(values)!r} repeats a dimension")
    return tuple(values)
