"""The two forward-pass products PromptBERT reads: the [MASK] state of a prompted batch, and the template's own
[MASK] state for template denoising.

Both are shared by the training-free scorer (no gradients, eval mode) and ``model=promptbert`` (gradients and
dropout on: the authors compute the denoising states inside the training graph, ``models.py``'s ``get_delta`` with
``mask_embedding_sentence_delta_freeze`` off).
"""

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
    """The first position id the model gives a sequence: 0 for BERT, ``padding_idx + 1`` for RoBERTa / MPNet (their
    position table reserves the padding row), so the template-only pass uses the positions the prompted pass had.

    The authors pass ``arange`` (offset 0) to RoBERTa too; for BERT, the paper's model, both agree.
    """
    table = getattr(getattr(model, "embeddings", None), "position_embeddings", None)
    pad = getattr(table, "padding_idx", None)
    return 0 if pad is None else int(pad) + 1


def template_states(model: torch.nn.Module, template_ids: list[int], prefix_length: int, mask_index: int,
                    lengths: Tensor) -> Tensor:
    """``(len(lengths), hidden)``: the last-layer [MASK] state of the template alone, row ``i`` with the template's
    tokens from ``prefix_length`` on shifted by ``lengths[i]`` positions (where a sentence of that many tokens
    would have pushed them), as the authors' ``get_delta`` does for every length at once.

    ``mask_index``: the mask's index in ``template_ids``. Runs in the model's current mode (dropout in training).
    """
    param = next(model.parameters())
    rows, width = len(lengths), len(template_ids)
    ids = torch.tensor(template_ids, dtype=torch.long, device=param.device).expand(rows, width)
    positions = torch.arange(width, device=param.device).expand(rows, width) + position_offset(model)
    shift = torch.zeros_like(positions)
    shift[:, prefix_length:] = lengths.to(param.device).long().unsqueeze(1)
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=positions + shift, return_dict=True)
    return out.last_hidden_state[:, mask_index]
