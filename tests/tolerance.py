"""Float tolerances derived from the dtype and the size of the reductions, never from one machine's output.

Why: two computations of the same maths (a sentence alone vs in a padded batch, one rank vs two, a fused vs a
plain kernel, an export vs the live module) differ only by rounding, and how much depends on the CPU: oneDNN /
MKL pick other blockings, so other summation orders, on AVX-512 than on AVX2 (a tolerance read off one kind
failed on the other: SBERT-WK's padding test, 1.24e-05 against 1e-05). The rounding error of a sum of ``n``
terms is at most ``(n - 1) u`` times the sum of their magnitudes (``u = eps / 2``, Higham, *Accuracy and
Stability of Numerical Algorithms*, Sec. 3.1); with rounding errors of random sign it grows like
``sqrt(n) u``, which is what two orders of one sum differ by in practice. Every stage that feeds such a sum
into the next (a transformer layer, a normalisation, a pooling) adds its own error, so the bound grows with the
``depth`` of the chain. ``safety`` covers the constant of each stage (a matmul, softmax and LayerNorm per layer)
and ill-conditioned steps (a division by a small norm).

The tolerance is used as both ``atol`` and ``rtol``: ``|a - b| <= tol * (1 + |b|)``, i.e. absolute for values
near 0 and relative for large ones. It is far above the ~1e-7 by which such results differ in float32 and far
below any real bug (a mask that leaks padding, a wrong layer: differences of 1e-2 and more), so a test still fails
when the maths changes.
"""

from __future__ import annotations

import math

import torch

__all__ = ["float_tolerance", "tolerance_kwargs"]


def float_tolerance(dtype: torch.dtype, reduction: int, depth: int = 1, safety: float = 16.0) -> float:
    """The tolerance for two roundings of one computation.

    Args:
        dtype: the dtype the computation runs in (``torch.float32``, ``torch.bfloat16``, ...).
        reduction: the length of the longest sum in one stage (the hidden size of a matmul, the number of
            tokens a pooling averages, the rows of a covariance).
        depth: stages whose rounding errors chain (layers of an encoder + pooling / normalising steps).
        safety: the constant per stage (see the module docstring).
    """
    if reduction < 1 or depth < 1:
        raise ValueError(f"reduction and depth must be >= 1, got {reduction} and {depth}")
    return safety * torch.finfo(dtype).eps * math.sqrt(reduction) * depth


def tolerance_kwargs(dtype: torch.dtype, reduction: int, depth: int = 1, safety: float = 16.0) -> dict[str, float]:
    """``{"atol": tol, "rtol": tol}`` for ``torch.testing.assert_close`` / ``numpy.testing.assert_allclose``."""
    tol = float_tolerance(dtype, reduction, depth, safety)
    return {"atol": tol, "rtol": tol}


# The tiny random BERT of tests/conftest.py: 2 layers, hidden 32, intermediate 64 (its longest sum), plus the
# embedding LayerNorm and a pooling step.
TINY_BERT = tolerance_kwargs(torch.float32, reduction=64, depth=4)
