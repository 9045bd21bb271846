"""A frozen encoder that runs each batch once and then serves one layer's token states from memory.

Why: a sweep that trains many small heads on one frozen encoder (Latte-Mix over K, D, tau, seeds and
distances) would otherwise re-encode the same STS sentences for every configuration, and the encoder
pass costs far more than the head. Scorers batch deterministically (``BaseEncoder.encode`` sorts by
length), so the same sentence list yields the same batches; this wrapper memoises ``forward_ids`` by
the batch's token ids and keeps ONLY the chosen layer (all layers of a 7-layer model would be 7x the
memory). Scorers built on it must read layer ``-1`` (the only one it returns).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.encoders.token_batch import TokenBatch
from sts_lightning.embeddings.errors import ConfigError


class LayerMemoEncoder(BaseEncoder):
    """Wraps ``encoder``; ``forward_ids`` returns ``TokenBatch((layer_states,), mask, special)``, cached.

    Args:
        encoder: the frozen encoder (its weights must not change while this wrapper is used).
        layer: the hidden-state index to keep (HF order, -1 = last).
        dtype: storage dtype of the cached states (float16 halves memory; returned as float32).
    """

    def __init__(self, encoder: BaseEncoder, layer: int = -1, dtype: torch.dtype = torch.float32) -> None:
        n = encoder.num_layers
        if not -n <= layer < n:
            raise ConfigError(f"layer {layer} out of range for {encoder.name} ({n} hidden-state tensors: "
                              f"use {-n}..{n - 1})")
        self.encoder, self.layer, self.dtype = encoder, layer, dtype
        self.name = f"{encoder.name}@layer{layer}"
        self.batch_size, self.device = encoder.batch_size, encoder.device
        self._memo: dict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    @property
    def hidden_size(self) -> int:
        return self.encoder.hidden_size

    @property
    def num_layers(self) -> int:
        return 1

    def tokenize(self, sentences: Sequence[str]) -> list[list[int]]:
        return self.encoder.tokenize(sentences)

    def forward_ids(self, ids: Sequence[Sequence[int]]) -> TokenBatch:
        key = tuple(tuple(x) for x in ids)
        if key not in self._memo:
            with torch.inference_mode():
                batch = self.encoder.forward_ids(ids)
            states = batch.hidden_states[self.layer].to(self.dtype).cpu()
            self._memo[key] = (states, batch.attention_mask.cpu(), batch.special_tokens_mask.cpu())
        states, mask, special = self._memo[key]
        return TokenBatch(hidden_states=(states.float(),), attention_mask=mask, special_tokens_mask=special)
