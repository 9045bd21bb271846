"""Batches cut by a token budget instead of a sentence count, so every forward pass does about the same work.

What counts against the budget is what the pass computes: ``rows x longest`` on the padded path, the real tokens on
the packed one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch

from sts_lightning.embeddings.errors import ConfigError

# tokens per pass when neither batch_size nor max_tokens is set: cpu measured (docs/speed.md), cuda provisional
DEFAULT_MAX_TOKENS = {"cpu": 4096, "cuda": 65536}


def default_max_tokens(device: torch.device) -> int:
    """The default budget for this device type (devices other than the CPU take the CUDA one)."""
    return DEFAULT_MAX_TOKENS.get(device.type, DEFAULT_MAX_TOKENS["cuda"])


def check_batching(batch_size: int | None, max_tokens: int | None) -> None:
    """One line for a budget or count that cannot batch anything."""
    for name, value in (("batch_size", batch_size), ("max_tokens", max_tokens)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"encoder.{name} must be a positive integer or null, got {value!r}")


def plan_batches(lengths: Sequence[int], batch_size: int | None = None, max_tokens: int | None = None,
                 padded: bool = True) -> list[tuple[int, int]]:
    """``(start, stop)`` slices over ``lengths`` (sorted longest first) forming the forward passes; ``batch_size``
    wins over ``max_tokens``; a sentence longer than the budget gets a pass of its own."""
    n = len(lengths)
    if batch_size is not None:
        return [(start, min(start + batch_size, n)) for start in range(0, n, batch_size)]
    if max_tokens is None:
        raise ValueError("plan_batches needs batch_size or max_tokens")
    slices, start, used = [], 0, 0
    for i, length in enumerate(lengths):
        cost = lengths[start] * (i - start + 1) if padded else used + length
        if i > start and cost > max_tokens:
            slices.append((start, i))
            start, used = i, 0
        used += length
    if n:
        slices.append((start, n))
    return slices


@contextlib.contextmanager
def batching(encoder, batch_size: int | None, max_tokens: int | None) -> Iterator[None]:
    """``encoder`` batches by ``batch_size`` (or, when ``None``, by ``max_tokens``) inside the block; restored after."""
    if encoder is None or not hasattr(encoder, "batch_size"):
        yield
        return
    check_batching(batch_size, max_tokens)
    before = encoder.batch_size, getattr(encoder, "max_tokens", None)
    encoder.batch_size, encoder.max_tokens = batch_size, max_tokens
    try:
        yield
    finally:
        encoder.batch_size, encoder.max_tokens = before
