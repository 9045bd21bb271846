"""The one data structure every encoder hands to every pooling / scorer function: word vectors and transformers
look alike, with the special-token mask scorers need.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class TokenBatch:
    """Token states of every layer for one padded batch of sentences.

    Attributes:
        hidden_states: one ``(batch, tokens, hidden)`` float tensor per layer, Hugging Face order (0 = embeddings,
            -1 = last); static word vectors return one layer; a packed forward hands the same layout.
        attention_mask: ``(batch, tokens)`` with 1 for real tokens, 0 for padding.
        special_tokens_mask: ``(batch, tokens)`` bool, True for [CLS]/[SEP]-like tokens.
    """

    hidden_states: tuple[torch.Tensor, ...]
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


def unpack_layers(packed: Sequence[torch.Tensor], flat: torch.Tensor, rows: int, longest: int) -> tuple[torch.Tensor, ...]:
    """The layers of a packed forward (``(1, N, hidden)`` each) as a tuple of padded float32 ``(rows, longest,
    hidden)`` tensors, padding zeros (``torch.stack`` / ``torch.cat`` take tuples and lists only).
    """
    out = []
    for states in packed:
        grid = states.new_zeros(rows * longest, states.shape[-1], dtype=torch.float32)
        out.append(grid.index_copy(0, flat, states[0].float()).view(rows, longest, -1))  # autograd-safe
    return tuple(out)
