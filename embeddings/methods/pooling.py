"""Pooling baselines: token states of a ``TokenBatch`` -> one vector per sentence.

``mean``/``max`` pool the last layer over all real tokens, [CLS]/[SEP] included, as sentence-transformers'
``Pooling``; ``first_last_avg`` averages ``hidden_states[1]`` and the last (the corrected SimCSE / BERT-flow
convention); ``last2_avg`` the last two. On one-layer encoders every layer pooling is ``mean``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.encoders.token_batch import TokenBatch
from sts_lightning.embeddings.errors import UnsupportedError, unknown_choice
from sts_lightning.embeddings.methods.pooling_layers import LAYER_POOLINGS
from sts_lightning.embeddings.scoring.reading import Reading, pooled_reading
from sts_lightning.embeddings.scoring.scorer import Representation, VectorScorer


def masked_mean(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over tokens of ``(batch, tokens, hidden)`` where ``mask`` is 1."""
    m = mask.unsqueeze(-1).to(states.dtype)
    return (states * m).sum(1) / m.sum(1).clamp_min(1.0)


def cls_pool(batch: TokenBatch) -> torch.Tensor:
    return batch.hidden_states[-1][:, 0]


def mean_pool(batch: TokenBatch) -> torch.Tensor:
    return masked_mean(batch.hidden_states[-1], batch.attention_mask)


def max_pool(batch: TokenBatch) -> torch.Tensor:
    states = batch.hidden_states[-1]
    neg = torch.finfo(states.dtype).min
    return states.masked_fill(~batch.attention_mask.bool().unsqueeze(-1), neg).amax(1)


def layers_mean_pool(layers: Sequence[int]) -> Callable[[TokenBatch], torch.Tensor]:
    """Mean over tokens of the average of the given layers (indices into ``hidden_states``)."""

    def pool(batch: TokenBatch) -> torch.Tensor:
        if batch.num_layers == 1:
            return mean_pool(batch)
        avg = sum(batch.hidden_states[i] for i in layers) / len(layers)
        return masked_mean(avg, batch.attention_mask)

    return pool


POOLINGS: dict[str, Callable[[TokenBatch], torch.Tensor]] = {
    "cls": cls_pool,
    "mean": mean_pool,
    "max": max_pool,
    **{name: layers_mean_pool(list(layers)) for name, layers in LAYER_POOLINGS.items()},
}  # each is also a scorer of its own name, declared in ``pooling_method`` (a test checks the two agree)


def get_pooling(name: str) -> Callable[[TokenBatch], torch.Tensor]:
    if name not in POOLINGS:
        raise unknown_choice("pooling", name, POOLINGS)
    return POOLINGS[name]


class PoolingScorer(VectorScorer):
    """A pooled vector compared by cosine: the baseline every method is measured against."""

    def __init__(self, encoder: BaseEncoder, pooling: str = "mean", batch_size: int | None = None) -> None:
        self.pool = get_pooling(pooling)
        if pooling == "cls" and not getattr(encoder, "has_cls_token", True):
            raise UnsupportedError(f"pooling 'cls' needs an encoder with a [CLS] token; {encoder.name} has none")
        self.encoder = encoder
        self.pooling = pooling
        self.batch_size = batch_size
        self.name = pooling

    def reading(self) -> Reading:
        """The pooled vector of this pooling (``embeddings.scoring.reading``): shared by every scorer reading it."""
        return pooled_reading(self.pooling, self.pool)

    def from_pooled(self, x: torch.Tensor) -> Representation:
        return {"embedding": x}

    def represent(self, sentences: Sequence[str]) -> Representation:
        return self.from_pooled(self.encoder.encode(sentences, self.pool, batch_size=self.batch_size,
                                                    desc=f"{self.name} encode"))  # type: ignore[arg-type]
