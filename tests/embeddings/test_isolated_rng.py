"""``isolated_rng``: a block may draw random numbers, the run's generators continue as if it had not run."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from sts_lightning.embeddings.isolated_rng import isolated_rng, rng_isolated


def _draws() -> tuple:
    return torch.rand(3).tolist(), np.random.rand(3).tolist(), [random.random() for _ in range(3)]


def _state() -> tuple:
    return torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()


def test_a_block_that_draws_leaves_every_generator_where_it_was():
    torch.manual_seed(7), np.random.seed(7), random.seed(7)
    expected = _draws()
    torch.manual_seed(7), np.random.seed(7), random.seed(7)
    with isolated_rng():
        inside = _draws()
    assert inside == expected  # the block drew from the run's state ...
    assert _draws() == expected  # ... and the run draws the same numbers again, as if the block had not run


def test_a_seeded_block_is_a_function_of_its_seed_alone():
    torch.manual_seed(1)
    with isolated_rng(seed=3):
        a = torch.randn(4)
    torch.manual_seed(2)
    before = torch.get_rng_state()
    with isolated_rng(seed=3):
        b = torch.randn(4)
    assert torch.equal(a, b)
    assert torch.equal(torch.get_rng_state(), before)


def test_the_state_comes_back_when_the_block_raises():
    torch.manual_seed(5)
    before = _state()
    with pytest.raises(RuntimeError), isolated_rng(seed=9):
        _draws()
        raise RuntimeError("boom")
    after = _state()
    assert torch.equal(after[0], before[0]) and np.array_equal(after[1], before[1]) and after[2] == before[2]


def test_the_decorator_isolates_a_function_and_keeps_its_name_and_result():
    @rng_isolated
    def build(n: int) -> torch.Tensor:
        """Draws like a model's initialisation."""
        return torch.nn.Linear(n, n).weight.detach().clone()

    torch.manual_seed(0)
    before = torch.get_rng_state()
    weight = build(4)
    assert weight.shape == (4, 4) and build.__name__ == "build" and "initialisation" in build.__doc__
    assert torch.equal(torch.get_rng_state(), before)
