"""The in-memory store: one ``encode`` for what it lacks, the encoder's exact numbers, nothing encoded twice."""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.methods.pooling import POOLINGS
from sts_lightning.embeddings.scoring.reading import layer_reading, pooled_reading
from sts_lightning.embeddings.scoring.reading_store import ReadingStore
from tests.helpers import WORDS

pytestmark = pytest.mark.usefixtures("one_thread")
SENTENCES = [" ".join(WORDS[i:i + 3 + i % 5]) for i in range(0, 24, 2)]
CLS, MEAN = pooled_reading("cls", POOLINGS["cls"]), pooled_reading("mean", POOLINGS["mean"])


def test_rows_are_the_encoders_own_and_computed_once(tiny_encoder):
    store = ReadingStore(tiny_encoder)
    store.fill([CLS, MEAN], SENTENCES)
    assert tiny_encoder.sentences_encoded == len(SENTENCES) and store.computed == len(SENTENCES)
    for reading in (CLS, MEAN):
        assert torch.equal(store.pooled(reading, SENTENCES), tiny_encoder.encode(SENTENCES, reading.fn))
    encoded = tiny_encoder.sentences_encoded
    assert torch.equal(store.pooled(MEAN, SENTENCES[::-1]), store.pooled(MEAN, SENTENCES).flip(0))
    assert store.knows(MEAN, SENTENCES) and tiny_encoder.sentences_encoded == encoded


def test_only_what_is_lacking_is_encoded(tiny_encoder):
    store = ReadingStore(tiny_encoder)
    store.fill([MEAN], SENTENCES[:6])
    store.fill([MEAN], SENTENCES)
    assert tiny_encoder.sentences_encoded == len(SENTENCES)
    store.fill([CLS, MEAN], SENTENCES[:3])  # a new reading: its sentences once more, all readings in that pass
    assert tiny_encoder.sentences_encoded == len(SENTENCES) + 3


def test_a_layer_is_recorded_in_the_pooling_pass_and_served(tiny_encoder):
    layer = layer_reading(-1, tiny_encoder.num_layers)
    store = ReadingStore(tiny_encoder)
    store.fill([MEAN, layer], SENTENCES)
    assert tiny_encoder.sentences_encoded == len(SENTENCES)  # one pass for the pooling and the layer
    served = store.layer_view(layer).encode(SENTENCES, POOLINGS["mean"])
    assert torch.equal(served, store.pooled(MEAN, SENTENCES)) and tiny_encoder.sentences_encoded == len(SENTENCES)


def test_strings_that_tokenise_alike_keep_their_own_rows(tiny_encoder):
    pair = ["a dog runs in the park .", "A dog runs in the PARK ."]  # an uncased tokenizer: the same token ids
    sentences = [*SENTENCES, *pair]
    assert tiny_encoder.tokenize(pair[:1]) == tiny_encoder.tokenize(pair[1:])
    assert torch.equal(ReadingStore(tiny_encoder).pooled(MEAN, sentences), tiny_encoder.encode(sentences, MEAN.fn))


def test_each_sentence_is_tokenized_once(tiny_encoder, monkeypatch):
    """Memory-only pooled readings: the encoder tokenizes (on CUDA ahead, in a thread); keyed by token ids (a layer
    reading, the disk cache): the store tokenizes and hands the ids to ``encode``. Never both."""
    calls = []
    tokenize = tiny_encoder.tokenize
    monkeypatch.setattr(tiny_encoder, "tokenize", lambda xs: calls.append(len(xs)) or tokenize(xs))
    ReadingStore(tiny_encoder).fill([MEAN], SENTENCES)
    ReadingStore(tiny_encoder).fill([MEAN, layer_reading(-1, tiny_encoder.num_layers)], SENTENCES)
    assert calls == [len(SENTENCES), len(SENTENCES)]
