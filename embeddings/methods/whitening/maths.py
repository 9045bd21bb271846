"""BERT-whitening (Su et al. 2021, arXiv 2103.15316) as pure tensor maths: moment sums, fit, transform.

As the paper (Sec. 3, ``compute_kernel_bias``). The fit streams sums additive over batches and ranks, in float64:
the covariance subtracts two large numbers where pooled vectors have a large mean, and whitening blows up the error.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from sts_lightning.embeddings.errors import ConfigError

# Variances below this share of the largest one are floored there: a rank-deficient covariance (fewer
# sentences than dimensions, a dead dimension) would otherwise give 1/sqrt(0) = inf in W.
RELATIVE_FLOOR = 1e-10


class MomentSums(NamedTuple):
    """Additive statistics of a set of vectors: ``count`` (scalar), ``total`` ``(d,)``, ``outer`` ``(d, d)``, float64."""

    count: Tensor
    total: Tensor
    outer: Tensor

    def __add__(self, other: MomentSums) -> MomentSums:  # type: ignore[override]
        return MomentSums(self.count + other.count, self.total + other.total, self.outer + other.outer)

    def flat(self) -> Tensor:
        """One float64 vector ``[count, total, outer]``: what one all-reduce sums across ranks."""
        return torch.cat([self.count.reshape(1), self.total, self.outer.reshape(-1)])

    @classmethod
    def unflat(cls, flat: Tensor, dim: int) -> MomentSums:
        """Inverse of ``flat``."""
        return cls(flat[0], flat[1:1 + dim], flat[1 + dim:].reshape(dim, dim))


def moment_sums(x: Tensor) -> MomentSums:
    """``MomentSums`` of the rows of ``x`` ``(n, d)``, in float64 on ``x``'s device."""
    x = x.detach().double()
    return MomentSums(torch.tensor(float(x.shape[0]), dtype=torch.float64, device=x.device), x.sum(0), x.T @ x)


def moments(sums: MomentSums) -> tuple[Tensor, Tensor]:
    """``(mean, covariance)`` in float64; the covariance is the unbiased one (``/ (n - 1)``, as ``np.cov``)."""
    n = float(sums.count)
    if n < 2:
        raise ValueError(f"whitening needs at least 2 vectors to estimate a covariance, got {n:g}")
    mean = sums.total / n
    cov = (sums.outer - n * torch.outer(mean, mean)) / (n - 1)
    return mean, (cov + cov.T) / 2  # exactly symmetric


def principal_axes(cov: Tensor) -> tuple[Tensor, Tensor]:
    """``(U, s)``: the SVD of a covariance matrix, variances largest first (float64)."""
    u, s, _ = torch.linalg.svd(cov.double())
    return u, s


def check_k(k: int | None, dim: int, key: str = "model.k") -> int:
    """The number of kept columns: ``k`` itself, or ``dim`` for ``None``; ConfigError naming ``key`` otherwise."""
    if k is None:
        return dim
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= dim:
        raise ConfigError(f"{key}={k!r} is not allowed: it must be an integer from 1 to the vector width {dim} "
                          "(or null = all)")
    return k


def whitener(axes: Tensor, variances: Tensor, k: int | None = None) -> Tensor:
    """``W = U[:, :k] diag(1 / sqrt(s[:k]))`` from a decomposition (``principal_axes``); ``k=None``: every column."""
    k = check_k(k, axes.shape[1], "k")
    top = float(variances[0])
    s = variances.clamp_min(top * RELATIVE_FLOOR if top > 0 else torch.finfo(variances.dtype).tiny)
    return axes[:, :k] / s[:k].sqrt()


def whitening_matrix(cov: Tensor, k: int | None = None) -> Tensor:
    """``W`` (``d, k``, float64) of a covariance matrix: ``whitener`` of its ``principal_axes``."""
    return whitener(*principal_axes(cov), k)


def fit_whitening(sums: MomentSums, k: int | None = None) -> tuple[Tensor, Tensor]:
    """``(mu, W)`` in float64 from accumulated ``MomentSums`` (Su et al. 2021, Eq. 5-6)."""
    mean, cov = moments(sums)
    return mean, whitening_matrix(cov, k)


def whiten(x: Tensor, mean: Tensor, matrix: Tensor) -> Tensor:
    """``(x - mu) @ W`` in ``matrix``'s dtype on its device (the vectors move there)."""
    x = x.to(device=matrix.device, dtype=matrix.dtype)
    return (x - mean.to(x)) @ matrix
