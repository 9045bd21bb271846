"""BERT-whitening maths against numpy by hand, DDP-additive sums, the export round trip and its encoder check."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.whitening.maths import (
    MomentSums,
    check_k,
    fit_whitening,
    moment_sums,
    moments,
    whiten,
    whitening_matrix,
)

N, D = 300, 8
EPS64 = torch.finfo(torch.float64).eps


def _data(seed: int = 0) -> torch.Tensor:
    """Correlated vectors with a large mean (as BERT's) and variances 1..64: condition number ~ 64^2."""
    g = torch.Generator().manual_seed(seed)
    mix = torch.randn(D, D, generator=g, dtype=torch.float64)
    scales = torch.logspace(0, 3, D, base=4, dtype=torch.float64)
    return (torch.randn(N, D, generator=g, dtype=torch.float64) * scales) @ mix + 50.0


def _tol(x: torch.Tensor) -> float:
    """Float64 rounding of sums over N rows, amplified by the covariance's condition number (and D for the SVD)."""
    s = torch.linalg.svdvals(torch.from_numpy(np.cov(x.numpy().T)))
    return float(EPS64 * N * D * (s[0] / s[-1]) * 100)


def test_moments_equal_numpy_mean_and_cov():
    x = _data()
    mean, cov = moments(moment_sums(x))
    tol = _tol(x)
    np.testing.assert_allclose(mean.numpy(), x.numpy().mean(0), rtol=tol)
    np.testing.assert_allclose(cov.numpy(), np.cov(x.numpy().T), rtol=tol, atol=tol * float(cov.abs().max()))


@pytest.mark.parametrize("k", [None, 5, 1])
def test_whitened_fitting_data_has_identity_covariance(k):
    x = _data()
    mean, w = fit_whitening(moment_sums(x), k)
    kept = D if k is None else k
    assert w.shape == (D, kept)
    z = whiten(x, mean, w)
    np.testing.assert_allclose(z.numpy().mean(0), np.zeros(kept), atol=_tol(x))
    np.testing.assert_allclose(np.cov(z.numpy().T).reshape(kept, kept), np.eye(kept), atol=_tol(x))


def test_first_k_columns_are_the_top_principal_directions_by_numpy():
    """Bojone's ``compute_kernel_bias`` by hand in numpy: ``W = U diag(1/sqrt(s))``, first k columns.

    Column signs of an SVD are arbitrary, so the sign-free ``W W^T = U_k diag(1/s_k) U_k^T`` is compared.
    """
    x = _data(1)
    u, s, _ = np.linalg.svd(np.cov(x.numpy().T))
    for k in (D, 3):
        w_np = u[:, :k] / np.sqrt(s[:k])
        _, w = fit_whitening(moment_sums(x), k)
        expected = w_np @ w_np.T
        np.testing.assert_allclose((w @ w.T).numpy(), expected, atol=_tol(x) * np.abs(expected).max())
    _, w_all = fit_whitening(moment_sums(x), None)  # k = all: W W^T is the inverse covariance
    inv = np.linalg.inv(np.cov(x.numpy().T))
    np.testing.assert_allclose((w_all @ w_all.T).numpy(), inv, atol=_tol(x) * np.abs(inv).max())


def test_sums_of_two_halves_are_the_sums_of_the_whole():
    """What makes the DDP fit correct: ranks' sums add up (any split, unequal sizes), also through flat()."""
    x = _data(2)
    whole = moment_sums(x)
    for cut in (1, 137, N - 1):
        a, b = moment_sums(x[:cut]), moment_sums(x[cut:])
        both = MomentSums.unflat(a.flat() + b.flat(), D)  # what one all-reduce of the flat vectors gives
        for got, want in zip(both, whole, strict=True):
            torch.testing.assert_close(got, want, rtol=EPS64 * N * 4, atol=EPS64 * N * 4 * float(want.abs().max()))
        mean_h, w_h = fit_whitening(both)
        mean_w, w_w = fit_whitening(whole)
        torch.testing.assert_close(w_h @ w_h.T, w_w @ w_w.T, rtol=_tol(x), atol=_tol(x) * float((w_w @ w_w.T).abs().max()))


def test_rank_deficient_covariance_stays_finite():
    x = _data()[:4]  # 4 vectors in 8 dimensions: 5 zero variances
    mean, w = fit_whitening(moment_sums(x))
    assert torch.isfinite(w).all()


@pytest.mark.parametrize("k", [0, 9, 2.5, True, "all"])
def test_k_out_of_range_names_the_key(k):
    with pytest.raises(ConfigError, match=r"model\.k=.*vector width 8"):
        check_k(k, 8)
    with pytest.raises(ConfigError, match="k="):
        whitening_matrix(torch.eye(8), k)  # type: ignore[arg-type]


def test_fewer_than_two_vectors_is_an_error():
    with pytest.raises(ValueError, match="at least 2"):
        moments(moment_sums(torch.ones(1, 3)))
