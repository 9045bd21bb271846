"""Tokenization of training batches in the DataLoader's workers, off the training step's critical path.

A batch's token ids depend only on its text and the tokenizer, so the loader's ``collate_fn`` makes them while the
previous step runs (docs/speed.md); the step reads ``batch[TOKEN_IDS]``. All picklable and Lightning-free.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from torch.utils.data import default_collate

__all__ = ["TOKEN_IDS", "BatchTokenizer", "TextTokenizer", "TokenizingCollate", "batch_token_ids"]

TOKEN_IDS = "token_ids"  # batch key: {text field: token ids per sentence} (or what a method's tokenizer returns)


class TextTokenizer:
    """``tokenizer(sentences)`` as ``HFEncoder.tokenize`` does it: ids per sentence, truncated, no padding; with
    ``offsets`` also each piece's character span (MLM's whole-word masking)."""

    def __init__(self, tokenizer, max_length: int, offsets: bool = False) -> None:
        self.tokenizer, self.max_length, self.offsets = tokenizer, int(max_length), bool(offsets)

    def __call__(self, sentences: Sequence[str]):
        out = self.tokenizer(list(sentences), truncation=True, max_length=self.max_length, add_special_tokens=True,
                             return_attention_mask=False, return_token_type_ids=False,
                             return_offsets_mapping=self.offsets)
        return (out["input_ids"], out["offset_mapping"]) if self.offsets else out["input_ids"]


class BatchTokenizer:
    """``batch -> batch`` with ``batch[TOKEN_IDS][field] = tokenize(batch[field])`` for each present ``field``."""

    def __init__(self, fields: Sequence[str], tokenize: Callable[[Sequence[str]], Any]) -> None:
        self.fields, self.tokenize = tuple(fields), tokenize

    def __call__(self, batch: dict) -> dict:
        ids = {field: self.tokenize(batch[field]) for field in self.fields if field in batch}
        return {**batch, TOKEN_IDS: ids}


class TokenizingCollate:
    """A datamodule's ``collate`` followed by a ``BatchTokenizer``: one picklable ``collate_fn`` for the loader."""

    def __init__(self, collate: Callable | None, tokenizer: BatchTokenizer) -> None:
        self.collate, self.tokenizer = collate, tokenizer

    def __call__(self, rows):
        return self.tokenizer((self.collate or default_collate)(rows))  # None: the DataLoader's own default


def batch_token_ids(batch: dict, field: str, tokenize: Callable[[Sequence[str]], Any]):
    """The worker-made ids of ``batch[field]``, or ``tokenize(batch[field])`` for a batch built by hand."""
    made = batch.get(TOKEN_IDS)
    if made is not None and field in made:
        return made[field]
    return tokenize(batch[field])
