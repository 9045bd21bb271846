"""``embed_length_buckets``: pooled vectors of token ids from a few length-sorted forward passes.

Why: one padded pass pads every sentence to the batch's longest, wasted work on a CPU (bound by arithmetic); the
pooled vectors equal one pass's up to float rounding (figures: docs/speed.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from sts_lightning.embeddings.encoders.hf import HFEncoder


def embed_length_buckets(encoder: HFEncoder, pool, ids: Sequence[Sequence[int]], buckets: int = 2) -> Tensor:
    """Pooled vectors of token ``ids`` (input order) from ``buckets`` passes over length-sorted groups of at least 8
    sentences (tiny matmuls lose more than padding costs)."""
    n = len(ids)
    groups = max(1, min(int(buckets), n // 8))
    if groups == 1:
        return pool(encoder.forward_ids(ids))
    order = sorted(range(n), key=lambda i: len(ids[i]))
    size = -(-n // groups)
    parts = [pool(encoder.forward_ids([ids[i] for i in order[start:start + size]])) for start in range(0, n, size)]
    inverse = torch.empty(n, dtype=torch.long)
    inverse[torch.tensor(order, dtype=torch.long)] = torch.arange(n)
    return torch.cat(parts)[inverse.to(parts[0].device)]
