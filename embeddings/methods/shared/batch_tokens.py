"""Tokenization of training batches in the DataLoader's workers, off the training step's critical path.

Why: a method that tokenizes inside ``training_step`` makes the accelerator wait for the host's tokenizer every
step (18 ms of an 85 ms SimCSE step on an H200, issue 39). The token ids of a batch depend only on the batch's
text and the tokenizer's settings, so the DataLoader's ``collate_fn`` can make them in its workers, while the
previous step runs; the step then reads them from ``batch[TOKEN_IDS]``.

Two small picklable objects (a worker process receives them with the collate function):

* ``TextTokenizer``: the Hugging Face tokenizer called exactly as ``HFEncoder.tokenize`` calls it (truncation at
  ``max_length``, special tokens, no padding), so worker ids equal in-step ids (tested);
* ``BatchTokenizer``: adds ``batch[TOKEN_IDS] = {field: ids}`` for the text fields a method embeds;
  ``TokenizingCollate`` runs a datamodule's own collate function and then it.

Lightning-free; the LightningModule says which fields it embeds (``EncoderModule.batch_tokenizer``)
and the datamodule puts the tokenizer into its loaders (``datamodules.loader.ResumableDataModule.tokenize_with``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from torch.utils.data import default_collate

__all__ = ["TOKEN_IDS", "BatchTokenizer", "TextTokenizer", "TokenizingCollate", "batch_token_ids"]

TOKEN_IDS = "token_ids"  # batch key: {text field: token ids per sentence} (or what a method's tokenizer returns)


class TextTokenizer:
    """``tokenizer(sentences)`` as ``HFEncoder.tokenize`` does it: ids per sentence, truncated, no padding.

    Args:
        tokenizer: a Hugging Face (fast) tokenizer; only it and two scalars travel to the workers.
        max_length: truncation in tokens, special tokens included (the encoder's ``max_length``).
        offsets: also return each piece's character span (MLM's whole-word masking): ``(ids, offsets)``.
    """

    def __init__(self, tokenizer, max_length: int, offsets: bool = False) -> None:
        self.tokenizer, self.max_length, self.offsets = tokenizer, int(max_length), bool(offsets)

    def __call__(self, sentences: Sequence[str]):
        out = self.tokenizer(list(sentences), truncation=True, max_length=self.max_length, add_special_tokens=True,
                             return_attention_mask=False, return_token_type_ids=False,
                             return_offsets_mapping=self.offsets)
        return (out["input_ids"], out["offset_mapping"]) if self.offsets else out["input_ids"]


class BatchTokenizer:
    """``batch -> batch`` with ``batch[TOKEN_IDS][field] = tokenize(batch[field])`` for each present ``field``.

    Fields a batch lacks are skipped (one method reads ``sentences1`` or ``anchors`` depending on its data
    format); the input dict is not changed.
    """

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
    """The worker-made ids of ``batch[field]``, or ``tokenize(batch[field])`` where the loader made none.

    Why a fallback: a batch built by hand (a benchmark, a notebook calling ``training_step``) has only text; it is
    tokenized here exactly as a worker would have (``TextTokenizer`` == ``HFEncoder.tokenize``). A Trainer with one of
    our datamodules never takes this path (``tests/lightning_modules/test_worker_tokens.py`` fails if it does).
    """
    made = batch.get(TOKEN_IDS)
    if made is not None and field in made:
        return made[field]
    return tokenize(batch[field])
