"""Token-budget batches: what counts (padded area or real tokens), an explicit count wins, the defaults, errors."""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.encoders.token_budget import (
    DEFAULT_MAX_TOKENS,
    batching,
    check_batching,
    default_max_tokens,
    plan_batches,
)
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.pooling import mean_pool

LENGTHS = [10, 8, 8, 5, 3, 3, 2]


def test_padded_area_counts_rows_times_longest():
    # [10, 8] = 2 x 10 = 20; [8, 5, 3] = 24; [3, 2] = 6
    assert plan_batches(LENGTHS, max_tokens=24, padded=True) == [(0, 2), (2, 5), (5, 7)]


def test_packed_counts_real_tokens():
    # 10 + 8 = 18 (+8 = 26 > 24); 8 + 5 + 3 + 3 + 2 = 21
    assert plan_batches(LENGTHS, max_tokens=24, padded=False) == [(0, 2), (2, 7)]


def test_a_sentence_over_the_budget_runs_alone_and_nothing_is_lost():
    plan = plan_batches(LENGTHS, max_tokens=4, padded=True)
    assert plan[0] == (0, 1) and sum(b - a for a, b in plan) == len(LENGTHS)


def test_an_explicit_count_wins():
    assert plan_batches(LENGTHS, batch_size=3, max_tokens=1) == [(0, 3), (3, 6), (6, 7)]


def test_defaults_per_device():
    assert default_max_tokens(torch.device("cpu")) == DEFAULT_MAX_TOKENS["cpu"]
    assert default_max_tokens(torch.device("meta")) == DEFAULT_MAX_TOKENS["cuda"]


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "64"])
def test_bad_values_one_line(bad):
    with pytest.raises(ConfigError, match=r"encoder\.max_tokens must be a positive integer or null"):
        check_batching(None, bad)


def test_encoder_batches_by_budget_when_no_count(tiny_encoder):
    sizes = []
    tiny_encoder.batch_size, tiny_encoder.max_tokens = None, 20

    def pool(batch):
        sizes.append(tuple(batch.attention_mask.shape))
        return mean_pool(batch)

    tiny_encoder.encode(["a man plays a guitar .", "a dog runs .", "the cat .", "a girl reads a book ."], pool)
    assert all(rows * width <= 20 or rows == 1 for rows, width in sizes) and len(sizes) > 1


def test_batching_context_restores(tiny_encoder):
    with batching(tiny_encoder, None, 128):
        assert (tiny_encoder.batch_size, tiny_encoder.max_tokens) == (None, 128)
    assert (tiny_encoder.batch_size, tiny_encoder.max_tokens) == (4, None)
