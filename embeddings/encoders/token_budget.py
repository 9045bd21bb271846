"""Batches cut by a token budget instead of a sentence count.

Why: a fixed sentence count gives a forward pass of 64 ten-token sentences 1/10 of the work of 64 hundred-token
ones, so short sentences run in small, launch-bound matmuls (on a GPU: kernel launches, not arithmetic) and long
ones in oversized ones. A budget gives every pass about the same work. What counts against it is what the pass
computes: on the padded path ``rows x longest`` (the padded area), on the packed path the real tokens (the dense
work; ``embeddings.encoders.packing``). Sentences come sorted by length (longest first), so the two are close.

Defaults (``DEFAULT_MAX_TOKENS``), chosen by measurement (``benchmarks/speed/encode_engine.py``, numbers in
``docs/speed.md``): on the CPU the budget that encoded STS-B dev fastest with all-MiniLM-L6-v2 on this 2-core
machine; on CUDA a PROVISIONAL figure, to be measured by the GPU script (``benchmarks/gpu/gpu_checklist.sh``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch

from sts_lightning.embeddings.errors import ConfigError

# device type -> tokens per forward pass when neither ``batch_size`` nor ``max_tokens`` is set. cpu: the fastest of
# 2048 / 4096 / 8192 / 16384 on STS-B dev with all-MiniLM-L6-v2 (1.98x 64 sentences a batch, docs/speed.md).
# cuda: PROVISIONAL, not measured by us: issue 39's padded bf16 BERT-base forward on an H200 peaked at batch 2,048
# (~65k tokens); the GPU script (benchmarks.speed.encode_engine --device cuda) is to measure it.
DEFAULT_MAX_TOKENS = {"cpu": 4096, "cuda": 65536}


def default_max_tokens(device: torch.device) -> int:
    """The measured budget for this device type (the CUDA one is provisional; other devices take it too)."""
    return DEFAULT_MAX_TOKENS.get(device.type, DEFAULT_MAX_TOKENS["cuda"])


def check_batching(batch_size: int | None, max_tokens: int | None) -> None:
    """One line for a budget or count that cannot batch anything."""
    for name, value in (("batch_size", batch_size), ("max_tokens", max_tokens)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"encoder.{name} must be a positive integer or null, got {value!r}")


def plan_batches(lengths: Sequence[int], batch_size: int | None = None, max_tokens: int | None = None,
                 padded: bool = True) -> list[tuple[int, int]]:
    """``(start, stop)`` slices over ``lengths`` (sorted longest first) forming the forward passes.

    Args:
        lengths: token count of each sentence, in the order they will be batched (longest first).
        batch_size: sentences per pass; when set it wins over ``max_tokens`` (an explicit count is honoured).
        max_tokens: the budget: padded area (``padded=True``) or real tokens per pass. A sentence longer than
            the budget still gets a pass of its own.
        padded: what counts against the budget (see the module docstring).
    """
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
    """``encoder`` batches by ``batch_size`` (or, when ``None``, by ``max_tokens``) inside the block; restored after.

    Why: the STS callback evaluates the module's live encoder, which the method built with its own
    ``eval_batch_size``; the callback's settings apply to its evaluations only.
    """
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
