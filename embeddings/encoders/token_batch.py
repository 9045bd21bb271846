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
            Static word-vector encoders return a single layer. A packed forward hands the same padded layout
            (``unpack_layers``).
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
    """The layers of a packed forward (``(1, N, hidden)`` each) as padded float32 ``(rows, longest, hidden)`` tensors.

    Padding positions are zeros (every pooling masks them). A plain tuple, as the padded path gives: scorers and
    benchmarks hand ``hidden_states`` to ``torch.stack`` / ``torch.cat``, which take tuples and lists only (a lazy
    sequence was tried and refused there). One ``index_copy`` per layer: ~1% of a forward.
    """
    out = []
    for states in packed:
        grid = states.new_zeros(rows * longest, states.shape[-1], dtype=torch.float32)
        out.append(grid.index_copy(0, flat, states[0].float()).view(rows, longest, -1))  # autograd-safe
    return tuple(out)
