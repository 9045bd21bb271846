"""The one data structure every encoder hands to every pooling / scorer: word vectors and transformers look alike."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class TokenBatch:
    """Token states of every layer for one padded batch of sentences."""

    hidden_states: tuple[torch.Tensor, ...]  # (batch, tokens, hidden) per layer, HF order (0 = embeddings, -1 = last)
    attention_mask: torch.Tensor  # (batch, tokens): 1 for real tokens, 0 for padding
    special_tokens_mask: torch.Tensor  # (batch, tokens) bool: True for [CLS]/[SEP]-like tokens

    @property
    def num_layers(self) -> int:
        return len(self.hidden_states)

    def stacked(self, start: int = 0) -> torch.Tensor:
        """All layers from ``start`` on as one ``(layers, batch, tokens, hidden)`` tensor."""
        return torch.stack(self.hidden_states[start:], dim=0)

    @property
    def lengths(self) -> torch.Tensor:
        return self.attention_mask.sum(dim=1)


def unpack_layers(packed: Sequence[torch.Tensor], flat: torch.Tensor, rows: int, longest: int) -> tuple[torch.Tensor, ...]:
    """The layers of a packed forward (``(1, N, hidden)`` each) as a tuple of zero-padded float32 ``(rows, longest,
    hidden)`` tensors (``torch.stack`` / ``torch.cat`` take tuples and lists only)."""
    out = []
    for states in packed:
        grid = states.new_zeros(rows * longest, states.shape[-1], dtype=torch.float32)
        out.append(grid.index_copy(0, flat, states[0].float()).view(rows, longest, -1))  # autograd-safe
    return tuple(out)
