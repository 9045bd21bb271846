"""LayerMemoEncoder: one forward pass per distinct batch, the chosen layer only, same scores as the encoder."""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.encoders.layer_memo import LayerMemoEncoder
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.pooling import PoolingScorer, masked_mean, mean_pool
from tests.helpers import WORDS
from tests.tolerance import TINY_BERT

SENTENCES = [" ".join(WORDS[i:i + 4 + i % 3]) for i in range(0, 24, 2)]


def test_memo_serves_the_layer_once_and_scores_like_the_encoder(tiny_encoder, monkeypatch):
    memo = LayerMemoEncoder(tiny_encoder, layer=1)
    calls = []
    original = tiny_encoder.forward_ids
    monkeypatch.setattr(tiny_encoder, "forward_ids", lambda ids: calls.append(len(ids)) or original(ids))
    first = memo.encode(SENTENCES, mean_pool)
    n_calls = len(calls)
    second = memo.encode(SENTENCES, mean_pool)
    assert len(calls) == n_calls > 0  # second pass: no forward pass, all from memory
    torch.testing.assert_close(first, second)
    direct = tiny_encoder.encode(SENTENCES, lambda b: masked_mean(b.hidden_states[1], b.attention_mask))
    torch.testing.assert_close(first, direct, **TINY_BERT)
    monkeypatch.undo()
    last = LayerMemoEncoder(tiny_encoder, layer=-1)
    torch.testing.assert_close(PoolingScorer(last, "mean").score_pairs(SENTENCES[:6], SENTENCES[6:]),
                               PoolingScorer(tiny_encoder, "mean").score_pairs(SENTENCES[:6], SENTENCES[6:]),
                               **TINY_BERT)


def test_layer_out_of_range(tiny_encoder):
    with pytest.raises(ConfigError, match="out of range"):
        LayerMemoEncoder(tiny_encoder, layer=tiny_encoder.num_layers)
