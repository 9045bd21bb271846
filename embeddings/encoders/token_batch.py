"""The one data structure every encoder hands to every pooling / scorer function.

Why a dataclass and not the raw Hugging Face output: static word vectors (GloVe) and transformer
encoders must look the same to the scorers, and scorers need the special-token mask (SBERT-WK drops
[SEP], pooling baselines keep it) without knowing which tokenizer produced the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class TokenBatch:
    """Token states of every layer for one padded batch of sentences.

    Attributes:
        hidden_states: one ``(batch, tokens, hidden)`` float tensor per layer; index 0 is the
            embedding output, index -1 the last layer (the Hugging Face ``hidden_states`` order).
            Static word-vector encoders return a single layer. A packed forward hands a ``PackedLayers``: the
            same tensors, each unpacked when first read.
        attention_mask: ``(batch, tokens)`` with 1 for real tokens, 0 for padding.
        special_tokens_mask: ``(batch, tokens)`` bool, True for [CLS]/[SEP]-like tokens.
    """

    hidden_states: Sequence[torch.Tensor]
    attention_mask: torch.Tensor
    special_tokens_mask: torch.Tensor

    @property
    def num_layers(self) -> int:
        return len(self.hidden_states)

    def stacked(self, start: int = 0) -> torch.Tensor:
        """All layers from ``start`` on as one ``(layers, batch, tokens, hidden)`` tensor."""
        return torch.stack(self.hidden_states[start:], dim=0)

    @property
    def lengths(self) -> torch.Tensor:
        return self.attention_mask.sum(dim=1)


class PackedLayers(Sequence):
    """The layers of a packed forward (``(1, N, hidden)`` each) seen as padded ``(batch, longest, hidden)`` tensors.

    Why lazy: a pooling reads one or two layers (mean: the last), SBERT-WK a few; unpacking all 13 of a BERT-base
    on every batch would copy what nobody reads. A layer is unpacked (and cast to float32) on first access and
    kept, so it is a plain tensor from then on; padding positions are zeros (every pooling masks them).
    """

    def __init__(self, packed: Sequence[torch.Tensor], flat: torch.Tensor, rows: int, longest: int) -> None:
        self._packed, self._flat, self._shape = tuple(packed), flat, (rows, longest)
        self._done: dict[int, torch.Tensor] = {}

    def __len__(self) -> int:
        return len(self._packed)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        i = range(len(self))[index]  # negative indices, and IndexError past the end
        if i not in self._done:
            states = self._packed[i][0]
            rows, longest = self._shape
            grid = states.new_zeros(rows * longest, states.shape[-1], dtype=torch.float32)
            self._done[i] = grid.index_copy(0, self._flat, states.float()).view(rows, longest, -1)  # autograd-safe
        return self._done[i]
