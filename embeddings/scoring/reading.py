"""What a scorer reads from its encoder: a ``Reading``, computed once per evaluation for every scorer that reads it.

Why: most scorers are "one deterministic encoder pass, then a function of it" -- a pooling is a function of the
token states, whitening a linear map of a pooled vector, BERT-flow a Glow of one, Latte-Mix a VAE posterior of
one layer's token states. Declaring the pass's product (instead of running it inside ``represent``) lets the
evaluation compute it ONCE per encoder for every scorer that reads it (``embeddings.scoring.shared_pass``), keep it
across the epochs of a training run while the encoder is frozen (``callbacks.sts_evaluation``) and across runs on
disk (``embeddings.scoring.reading_cache``). Two kinds:

- ``pooled``: one vector per sentence, ``fn(TokenBatch) -> (batch, d)``; ``name`` must identify ``fn``'s maths
  (the pooling name, SBERT-WK with its settings), because it is the cache key.
- ``layer``: the real (non-padding) token states of one hidden-state index and their special-token mask; the
  scorer reads them through ``embeddings.encoders.layer_memo.LayerMemoEncoder``.

Only eval-mode, deterministic passes are readings: MC dropout and other stochastic passes never go through them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from sts_lightning.embeddings.encoders.token_batch import TokenBatch

POOLED, LAYER = "pooled", "layer"


@dataclass(frozen=True)
class Reading:
    """One deterministic product of an encoder pass, per sentence; equal readings are computed once.

    Attributes:
        kind: ``"pooled"`` or ``"layer"``.
        name: the pooling's name (with its settings), or the hidden-state index as text.
        fn: pooled readings: ``TokenBatch -> (batch, d)``; not part of equality (``name`` is).
    """

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
