"""The [MASK] state of a prompted batch and the template's own [MASK] state for denoising (the authors'
``get_delta``), shared by the scorer and ``model=promptbert``."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from sts_lightning.embeddings.encoders.token_batch import TokenBatch


def mask_pooling(slot: int) -> Callable[[TokenBatch], Tensor]:
    """A pooling: each row's last-layer state at the template's [MASK] (``template.mask_slot``'s ``slot``)."""

    def pool(batch: TokenBatch) -> Tensor:
        last = batch.hidden_states[-1]
        rows = torch.arange(last.shape[0], device=last.device)
        index = torch.full_like(rows, slot) if slot >= 0 else batch.lengths.to(last.device) + slot
        return last[rows, index]

    return pool


def position_offset(model: torch.nn.Module) -> int:
    """The first position id: 0 for BERT, ``padding_idx + 1`` for RoBERTa / MPNet, so the template-only pass uses the
    prompted pass's positions (the authors pass 0 to RoBERTa too)."""
    table = getattr(getattr(model, "embeddings", None), "position_embeddings", None)
    pad = getattr(table, "padding_idx", None)
    return 0 if pad is None else int(pad) + 1


def template_states(model: torch.nn.Module, template_ids: list[int], prefix_length: int, mask_index: int,
                    lengths: Tensor) -> Tensor:
    """``(len(lengths), hidden)``: the [MASK] state of the template alone, its tokens from ``prefix_length`` on
    shifted by ``lengths[i]`` positions, as ``get_delta`` does."""
    param = next(model.parameters())
    rows, width = len(lengths), len(template_ids)
    ids = torch.tensor(template_ids, dtype=torch.long, device=param.device).expand(rows, width)
    positions = torch.arange(width, device=param.device).expand(rows, width) + position_offset(model)
    shift = torch.zeros_like(positions)
    shift[:, prefix_length:] = lengths.to(param.device).long().unsqueeze(1)
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=positions + shift, return_dict=True)
    return out.last_hidden_state[:, mask_index]
