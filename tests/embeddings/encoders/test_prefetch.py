"""Tokenization ahead in a thread (CUDA): chunks come in order, the encode result is the one-chunk result, the
tokenizer runs off the main thread, and an early stop leaves no chunk running."""

from __future__ import annotations

import threading

import pytest
import torch

from sts_lightning.embeddings.encoders import base, prefetch
from sts_lightning.embeddings.encoders.prefetch import TokenizedChunks, tokenized_chunks
from sts_lightning.embeddings.methods.pooling import mean_pool
from tests.tolerance import TINY_BERT

SENTENCES = ["a man plays a guitar .", "a dog runs .", "two children sing a song in the park .", "the cat .",
             "a woman cuts an onion .", "a boy rides a bike on the street .", "a girl reads ."]


def test_chunks_in_order_with_offsets():
    seen = []

    def tokenize(xs):
        seen.append(threading.current_thread().name)
        return [[len(x)] for x in xs]

    chunks = TokenizedChunks(tokenize, ["a", "bb", "ccc", "dddd", "eeeee"], chunk=2)
    assert len(chunks) == 3
    assert list(chunks) == [(0, [[1], [2]]), (2, [[3], [4]]), (4, [[5]])]
    assert all(name.startswith("sts-tokenize") for name in seen)


def test_one_chunk_on_cpu_in_this_thread(tiny_encoder):
    chunks = tokenized_chunks(tiny_encoder, SENTENCES)
    assert len(chunks) == 1 and chunks.chunk is None
    assert list(chunks) == [(0, tiny_encoder.tokenize(SENTENCES))]


def test_chunked_encode_equals_one_chunk(tiny_encoder, monkeypatch):
    whole = tiny_encoder.encode(SENTENCES * 2, mean_pool)
    monkeypatch.setattr(base, "tokenized_chunks",
                        lambda enc, xs: TokenizedChunks(enc.tokenize, xs, chunk=3))  # what CUDA does, chunk 3
    torch.testing.assert_close(tiny_encoder.encode(SENTENCES * 2, mean_pool), whole, **TINY_BERT)


def test_an_error_in_a_batch_stops_the_tokenizer(tiny_encoder, monkeypatch):
    calls = []

    def tokenize(xs):
        calls.append(len(xs))
        return tiny_encoder.tokenize(xs)

    monkeypatch.setattr(base, "tokenized_chunks", lambda enc, xs: TokenizedChunks(tokenize, xs, chunk=1))

    def failing(batch):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        tiny_encoder.encode(SENTENCES, failing)
    assert sum(calls) <= len(SENTENCES) and prefetch.CHUNK > 1
