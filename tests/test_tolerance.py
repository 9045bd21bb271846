"""The tolerance helper: grows with the dtype's epsilon, the reduction's size and the depth; refuses nonsense."""

from __future__ import annotations

import pytest
import torch

from tests.tolerance import float_tolerance, tolerance_kwargs


def test_tolerance_scales_with_epsilon_sqrt_reduction_and_depth():
    base = float_tolerance(torch.float32, reduction=64, depth=1)
    assert float_tolerance(torch.float32, reduction=256, depth=1) == pytest.approx(2 * base)
    assert float_tolerance(torch.float32, reduction=64, depth=3) == pytest.approx(3 * base)
    assert float_tolerance(torch.bfloat16, reduction=64) / base == pytest.approx(
        torch.finfo(torch.bfloat16).eps / torch.finfo(torch.float32).eps)
    assert float_tolerance(torch.float64, reduction=64) < 1e-12 < base < 1e-4
    assert tolerance_kwargs(torch.float32, 64) == {"atol": base, "rtol": base}


def test_a_real_difference_is_far_outside_it():
    """A leaked padding token or a wrong layer moves a pooled vector by ~1e-2: the tests must still see that."""
    assert float_tolerance(torch.float32, reduction=64, depth=8) < 1e-3


@pytest.mark.parametrize("reduction,depth", [(0, 1), (4, 0)])
def test_refuses_empty_reductions_and_depths(reduction, depth):
    with pytest.raises(ValueError, match="reduction and depth"):
        float_tolerance(torch.float32, reduction, depth)
