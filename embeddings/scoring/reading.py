"""What a scorer reads from its encoder: a ``Reading`` (``pooled``: one vector per sentence, ``name`` naming the
maths; ``layer``: one hidden state's token states), computed once per encoder (``shared_pass``), kept while the
encoder is frozen and cached on disk (``reading_cache``). Eval-mode passes only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from sts_lightning.embeddings.encoders.token_batch import TokenBatch

POOLED, LAYER = "pooled", "layer"


@dataclass(frozen=True)
class Reading:
    """One deterministic product of an encoder pass, per sentence, computed once per ``kind`` and ``name``; ``fn``:
    pooled readings' ``TokenBatch -> (batch, d)``."""

    kind: str
    name: str
    fn: Callable[[TokenBatch], torch.Tensor] | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> str:
        """``pooled/first_last_avg``, ``layer/-1``: the reading's part of a cache key and its folder name."""
        return f"{self.kind}/{self.name}"

    @property
    def layer(self) -> int:
        if self.kind != LAYER:
            raise ValueError(f"{self.key} is not a layer reading")
        return int(self.name)


def pooled_reading(name: str, fn: Callable[[TokenBatch], torch.Tensor]) -> Reading:
    return Reading(POOLED, str(name), fn)


def layer_reading(layer: int, num_layers: int) -> Reading:
    """Token states of hidden-state ``layer``, its index made non-negative so ``-1`` and ``num_layers - 1`` agree."""
    return Reading(LAYER, str(int(layer) % int(num_layers)))
