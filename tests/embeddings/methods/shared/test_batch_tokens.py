"""Worker-side tokenization (``embeddings.methods.shared.batch_tokens``): the same ids as the encoder makes.

Why: the DataLoader's workers tokenize training batches instead of ``training_step``; that is only a speed-up if
every id is the one ``HFEncoder.tokenize`` would have made (truncation, special tokens), and the collate function
must travel to a worker process (pickle) without the model.
"""

from __future__ import annotations

import pickle

from sts_lightning.embeddings.encoders.hf import HFEncoder
from sts_lightning.embeddings.methods.shared.batch_tokens import (
    TOKEN_IDS,
    BatchTokenizer,
    TextTokenizer,
    TokenizingCollate,
    batch_token_ids,
)
from tests.helpers import WORDS

LONG = " ".join(WORDS)  # longer than max_length: truncated
SENTENCES = ["a man plays a guitar .", "the dog runs in the park .", LONG, "two children , a ball ."]


def test_text_tokenizer_makes_the_encoders_ids(tiny_model_dir):
    encoder = HFEncoder.from_pretrained(str(tiny_model_dir), max_length=8)
    tokenize = TextTokenizer(encoder.tokenizer, encoder.max_length)
    assert tokenize(SENTENCES) == encoder.tokenize(SENTENCES)
    assert max(len(ids) for ids in tokenize(SENTENCES)) == 8  # truncated as the encoder truncates
    ids, offsets = TextTokenizer(encoder.tokenizer, 8, offsets=True)(SENTENCES)
    assert ids == encoder.tokenize(SENTENCES) and [len(o) for o in offsets] == [len(i) for i in ids]


def test_batch_tokenizer_adds_the_present_fields_and_leaves_the_batch(tiny_model_dir):
    encoder = HFEncoder.from_pretrained(str(tiny_model_dir), max_length=16)
    batch = {"sentences1": SENTENCES[:2], "sentences2": SENTENCES[2:], "labels": [0, 1]}
    out = BatchTokenizer(("sentences1", "sentences2", "anchors"), encoder.tokenize)(batch)
    assert TOKEN_IDS not in batch  # the input dict is not changed
    assert out[TOKEN_IDS] == {"sentences1": encoder.tokenize(SENTENCES[:2]), "sentences2": encoder.tokenize(SENTENCES[2:])}
    assert batch_token_ids(out, "sentences1", lambda s: 1 / 0) == encoder.tokenize(SENTENCES[:2])  # no call
    assert batch_token_ids(batch, "sentences2", encoder.tokenize) == encoder.tokenize(SENTENCES[2:])  # fallback


def _collate(rows):
    return {"sentences": list(rows)}


def test_tokenizing_collate_pickles_without_the_model(tiny_model_dir):
    """A spawned worker receives the collate function by pickle: the tokenizer and scalars only, same ids."""
    encoder = HFEncoder.from_pretrained(str(tiny_model_dir), max_length=16)
    collate = TokenizingCollate(_collate, BatchTokenizer(("sentences",), TextTokenizer(encoder.tokenizer, 16)))
    data = pickle.dumps(collate)
    assert len(data) < 200_000
    back = pickle.loads(data)
    assert back(SENTENCES) == collate(SENTENCES)
    assert back(SENTENCES)[TOKEN_IDS]["sentences"] == encoder.tokenize(SENTENCES)
    default = TokenizingCollate(None, BatchTokenizer(("sentences",), encoder.tokenize))
    assert default([{"sentences": s} for s in SENTENCES])[TOKEN_IDS]["sentences"] == encoder.tokenize(SENTENCES)
