"""BERT's masked-language-model objective (Devlin et al. 2019) as pure functions: rows, masks, loss.

Masking is ``DataCollatorForLanguageModeling.torch_mask_tokens`` itself, drawn from ``mask_generator`` (a pure
function of seed, stream, step, rank: a resumed run draws the same masks); padding: docs/results/raw_backbone.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

IGNORE = -100  # the label of a position the loss skips (transformers' convention)
TRAIN_STREAM, HELDOUT_STREAM = 0, 1  # seeds of training masks and of the held-out set never meet

__all__ = ["IGNORE", "Rows", "build_rows", "mask_generator", "mask_rows", "masked_lm_loss", "masker", "pack_rows"]


def mask_generator(seed: int, *keys: int) -> torch.Generator:
    """A CPU generator seeded from ``(seed, *keys)`` through numpy's ``SeedSequence`` (nearby keys: unrelated streams)."""
    state = np.random.SeedSequence([int(seed), *map(int, keys)]).generate_state(1, np.uint64)[0]
    return torch.Generator().manual_seed(int(state))


def masker(tokenizer, mlm_probability: float = 0.15, whole_word_mask: bool = False):
    """The collator whose ``torch_mask_tokens`` masks the rows (BERT's 80/10/10; whole words: all ``[MASK]``)."""
    from transformers import DataCollatorForLanguageModeling

    with warnings.catch_warnings():  # whole words: "Random token replacement is not supported": documented above
        warnings.simplefilter("ignore", UserWarning)
        return DataCollatorForLanguageModeling(tokenizer, mlm=True, whole_word_mask=whole_word_mask,
                                               mlm_probability=mlm_probability)


@dataclass(frozen=True)
class Rows:
    """Padded rows: ids, attention mask, never-masked positions, piece offsets (``(rows, length, 2)``, whole-word only)."""

    input_ids: Tensor
    attention_mask: Tensor
    special: Tensor
    offsets: np.ndarray | None = None

    @property
    def padding_share(self) -> float:
        return 1.0 - float(self.attention_mask.float().mean()) if self.attention_mask.numel() else 0.0

    @property
    def tokens(self) -> int:
        return int(self.attention_mask.sum())


def pack_rows(ids: Sequence[Sequence[int]], max_length: int,
              offsets: Sequence[Sequence[tuple[int, int]]] | None = None) -> tuple[list[list[int]], list[list] | None]:
    """Sentences ``[CLS] s [SEP]`` -> rows ``[CLS] s1 [SEP] s2 [SEP] ...`` of at most ``max_length`` (next fit)."""
    rows: list[list[int]] = []
    spans: list[list] = []
    for i, sentence in enumerate(ids):
        where = list(offsets[i]) if offsets is not None else []
        if not rows or len(rows[-1]) + len(sentence) - 1 > max_length:  # does not fit: a new row
            rows.append(list(sentence))
            spans.append(where)
        else:
            rows[-1].extend(sentence[1:])
            spans[-1].extend(where[1:])
    return rows, (spans if offsets is not None else None)


def build_rows(ids: Sequence[Sequence[int]], special_ids: Sequence[int], pad_id: int, max_length: int,
               pack: bool = True, offsets: Sequence[Sequence[tuple[int, int]]] | None = None) -> Rows:
    """Tokenised sentences -> padded ``Rows`` (packed or one a row), special positions marked as the collator does."""
    if pack:
        ids, offsets = pack_rows(ids, max_length, offsets)
    longest = max((len(r) for r in ids), default=0)
    input_ids = torch.full((len(ids), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), longest), dtype=torch.long)
    for r, row in enumerate(ids):
        input_ids[r, :len(row)] = torch.tensor(row, dtype=torch.long)
        mask[r, :len(row)] = 1
    special = torch.isin(input_ids, torch.tensor(list(special_ids), dtype=torch.long)) | ~mask.bool()
    spans = None
    if offsets is not None:
        spans = np.zeros((len(ids), longest, 2), dtype=np.int64)
        for r, row in enumerate(offsets):
            if row:
                spans[r, :len(row)] = np.asarray(row, dtype=np.int64)
    return Rows(input_ids, mask, special, spans)


def mask_rows(collator, rows: Rows, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """(masked input ids, labels with ``IGNORE`` where nothing is predicted), drawn from ``generator``."""
    collator.generator = generator
    try:
        return collator.torch_mask_tokens(rows.input_ids.clone(), special_tokens_mask=rows.special.long(),
                                          offset_mapping=rows.offsets)
    finally:
        collator.generator = None


def masked_lm_loss(hidden: Tensor, labels: Tensor, head: Callable[[Tensor], Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """(mean cross-entropy, predicted ids, true ids) of the masked positions, ``head`` run on those only. With nothing
    masked the loss is 0 with every head parameter in the graph, so DDP sees the same parameters on every rank."""
    where = labels != IGNORE
    logits = head(hidden[where])
    targets = labels[where]
    loss = F.cross_entropy(logits.float(), targets) if len(targets) else logits.sum() * 0.0
    return loss, logits.detach().argmax(-1), targets
