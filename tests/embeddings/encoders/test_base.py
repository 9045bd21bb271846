"""The shared encode loop: order restored, duplicates encoded once, padding-invariant, clear errors."""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.embeddings.methods.pooling import POOLINGS, PoolingScorer, get_pooling, mean_pool
from tests.helpers import token_batch
from tests.tolerance import TINY_BERT

SENTENCES = ["a man plays a guitar .", "a dog runs .", "a man plays a guitar .", "two children sing a song in the park ."]


def test_encode_restores_order_and_dedupes(tiny_encoder):
    calls = []

    def pool(batch):
        calls.append(batch.attention_mask.shape[0])
        return mean_pool(batch)

    out = tiny_encoder.encode(SENTENCES, pool, batch_size=2)
    assert out.shape == (4, 32)
    assert sum(calls) == 3  # the duplicate is encoded once
    torch.testing.assert_close(out[0], out[2])
    alone = tiny_encoder.encode([SENTENCES[1]], mean_pool)
    torch.testing.assert_close(out[1], alone[0], **TINY_BERT)  # padding does not leak in


def test_every_pooling_shapes_and_finite(tiny_encoder):
    for name in POOLINGS:
        emb = PoolingScorer(tiny_encoder, name).represent(SENTENCES)["embedding"]
        assert emb.shape == (4, 32) and torch.isfinite(emb).all(), name


def test_layer_poolings_use_the_right_layers(tiny_encoder):
    batch = token_batch(tiny_encoder, ["a man plays a guitar ."])
    hs = batch.hidden_states
    torch.testing.assert_close(get_pooling("first_last_avg")(batch), ((hs[1] + hs[-1]) / 2).mean(1))
    torch.testing.assert_close(get_pooling("last2_avg")(batch), ((hs[-2] + hs[-1]) / 2).mean(1))
    torch.testing.assert_close(get_pooling("cls")(batch), hs[-1][:, 0])


def test_special_tokens_mask_marks_only_boundaries(tiny_encoder):
    batch = token_batch(tiny_encoder, ["a zebra plays ."])  # 'zebra' is [UNK]: a word, not special
    assert batch.special_tokens_mask[0].tolist() == [True, False, False, False, False, True]


def test_stochastic_mode_varies_and_restores_eval(tiny_encoder):
    with torch.inference_mode(), tiny_encoder.stochastic():
        a = mean_pool(tiny_encoder.forward_ids(tiny_encoder.tokenize(SENTENCES[:1])))
        b = mean_pool(tiny_encoder.forward_ids(tiny_encoder.tokenize(SENTENCES[:1])))
    assert not torch.allclose(a, b)
    assert not tiny_encoder.model.training


@pytest.mark.parametrize(("bad", "message"), [(["ok", ""], "sentence 1 is empty"), (["ok", None], "not a string"),
                                              ([], "empty")])
def test_bad_sentences(tiny_encoder, bad, message):
    with pytest.raises(DataError, match=message):
        tiny_encoder.encode(bad, mean_pool)


def test_unknown_pooling():
    with pytest.raises(ConfigError, match="unknown pooling 'avg'.*mean"):
        get_pooling("avg")


def test_encode_takes_token_ids_it_was_given(tiny_encoder, monkeypatch):
    """The reading store hands the ids it keys by: the same vectors, no second tokenization."""
    ids = tiny_encoder.tokenize(SENTENCES)
    expected = tiny_encoder.encode(SENTENCES, mean_pool)
    monkeypatch.setattr(tiny_encoder, "tokenize", lambda xs: pytest.fail("tokenized again"))
    torch.testing.assert_close(tiny_encoder.encode(SENTENCES, mean_pool, ids=ids), expected)
