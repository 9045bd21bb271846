"""Sentence meta-embeddings (Poerner et al. 2020): one vector from the vectors of J frozen sources.

Pure functions of the source vectors ("views", ``(n, d_j)`` each); the cross-view autoencoder is trained
(``lightning_modules.cross_view_ae``) and plugs in through ``apply``.

- ``conc``: ``[x_1/|x_1|; ...; x_J/|x_J|]`` (Sec. 3.1).
- ``avg``: the mean of the length-normalised views, zero-padded to the largest dimension (Sec. 3.1).
- ``svd``: ``V^T (conc(s) - E[conc])``, ``V`` the top-d right singular vectors of the centred concatenation (Sec. 3.2).
- ``gcca``: ``sum_j Theta_j (x_j - mu_j)``, ``Theta`` the top-d generalized eigenvectors of (off-diagonal covariance
  blocks) vs (block-diagonal covariances + tau * mean(diag Sigma_jj) * I) (Sec. 3.3); float64 (ill-conditioned).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from sts_lightning.embeddings.errors import ConfigError, DataError

NAIVE = ("conc", "avg")
CLOSED_FORM = ("svd", "gcca")
METHODS = (*NAIVE, *CLOSED_FORM, "ae")


def l2_normalize(x: Tensor, eps: float = 1e-12) -> Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(eps)


def orthogonal_procrustes(source: Tensor, target: Tensor) -> tuple[Tensor, float]:
    """``(R, s)`` minimising ``|s * source @ R - target|`` over ``R`` with orthonormal rows or columns (float64), on
    rows of the same sentences; ``d_s != d_t`` gives the semi-orthogonal thin-SVD solution."""
    if source.shape[0] != target.shape[0]:
        raise ConfigError(f"Procrustes needs the same sentences on both sides, got {source.shape[0]} and {target.shape[0]} rows")
    source, target = source.double(), target.double()
    u, _, vh = torch.linalg.svd(source.T @ target, full_matrices=False)
    rotation = u @ vh
    scale = float((source @ rotation * target).sum() / (source * source).sum())
    return rotation, scale


def check_views(views: Sequence[Tensor], dims: Sequence[int] | None = None) -> None:
    """Same number of rows in every view, finite values, and the expected dimensions."""
    if not views:
        raise ConfigError("a meta-embedding needs at least one source")
    rows = {int(v.shape[0]) for v in views}
    if len(rows) != 1:
        raise DataError(f"the sources returned different numbers of rows: {sorted(rows)}")
    if dims is not None and [int(v.shape[1]) for v in views] != list(dims):
        raise ConfigError(f"the sources give {[int(v.shape[1]) for v in views]}-d vectors, the fitted "
                          f"meta-embedding expects {list(dims)}")
    for j, v in enumerate(views):
        if not torch.isfinite(v).all():
            raise DataError(f"source {j} returned non-finite vectors")


def concatenate(views: Sequence[Tensor]) -> Tensor:
    return torch.cat([l2_normalize(v.float()) for v in views], dim=1)


def average(views: Sequence[Tensor]) -> Tensor:
    width = max(int(v.shape[1]) for v in views)
    padded = [torch.nn.functional.pad(l2_normalize(v.float()), (0, width - int(v.shape[1]))) for v in views]
    return torch.stack(padded).mean(0)


def fit_svd(views: Sequence[Tensor], d: int) -> dict[str, Tensor]:
    """``mean`` of the concatenation and ``components`` ``(sum d_j, d)``: its top-d right singular vectors."""
    x = concatenate(views).double()
    if not 0 < d <= min(x.shape):
        raise ConfigError(f"svd: d={d} must be in 1..{min(x.shape)} (sentences x concatenated dims)")
    mean = x.mean(0)
    _, _, vh = torch.linalg.svd(x - mean, full_matrices=False)
    return {"mean": mean.float(), "components": vh[:d].T.contiguous().float()}


def fit_gcca(views: Sequence[Tensor], d: int, tau: float = 0.1) -> dict[str, Tensor]:
    """Per-view ``mean_j`` ``(d_j,)`` and ``theta_j`` ``(d_j, d)`` of GCCA; ``tau`` is relative to each view's mean
    variance."""
    from scipy.linalg import eigh

    dims = [int(v.shape[1]) for v in views]
    if not 0 < d <= sum(dims):
        raise ConfigError(f"gcca: d={d} must be in 1..{sum(dims)} (the summed source dimensions)")
    if tau < 0:
        raise ConfigError(f"gcca: tau must be >= 0, got {tau}")
    means = [v.double().mean(0) for v in views]
    centred = torch.cat([v.double() - m for v, m in zip(views, means, strict=True)], dim=1).numpy()
    n = centred.shape[0]
    if n < 2:
        raise DataError("gcca needs at least 2 fitting sentences")
    sigma = centred.T @ centred / (n - 1)
    bounds = np.cumsum([0, *dims])
    block_diag, off_diag = np.zeros_like(sigma), sigma.copy()
    for j in range(len(dims)):
        lo, hi = bounds[j], bounds[j + 1]
        block = sigma[lo:hi, lo:hi]
        block_diag[lo:hi, lo:hi] = block + tau * np.trace(block) / dims[j] * np.eye(dims[j])
        off_diag[lo:hi, lo:hi] = 0.0
    total = sum(dims)
    try:
        values, vectors = eigh(off_diag, block_diag, subset_by_index=[total - d, total - 1])
    except np.linalg.LinAlgError as err:
        raise ConfigError(f"gcca: the regularised covariance is singular ({err}); raise tau above {tau}") from err
    values, vectors = values[::-1].copy(), vectors[:, ::-1]  # largest eigenvalue first
    out: dict[str, Tensor] = {"eigenvalues": torch.from_numpy(values).float()}
    for j in range(len(dims)):
        out[f"mean_{j}"] = means[j].float()
        out[f"theta_{j}"] = torch.from_numpy(np.ascontiguousarray(vectors[bounds[j]:bounds[j + 1]])).float()
    return out


@dataclass
class MetaProjection:
    """A fitted (or naive) meta-embedding: method, source dims, options and its tensors (``autoencoder`` for ``ae``)."""

    method: str
    dims: list[int]
    options: dict = field(default_factory=dict)
    tensors: dict[str, Tensor] = field(default_factory=dict)
    autoencoder: torch.nn.Module | None = None

    def apply(self, views: Sequence[Tensor]) -> Tensor:
        """The meta-embedding ``(n, d)`` of aligned source vectors (rotated by ``align_rotation`` if fitted)."""
        out = self._combine(views)
        if "align_rotation" in self.tensors:
            out = out @ self.tensors["align_rotation"] * float(self.options["align_scale"])
        if "align_offset" in self.tensors:
            out = out + self.tensors["align_offset"]
        return out

    def align_to(self, views: Sequence[Tensor], target: Tensor, add_target_mean: bool = False) -> MetaProjection:
        """Rotate (and scale) the output onto ``target``'s space by orthogonal Procrustes, for a distillation student's
        MSE (GCCA / SVD / AE coordinates are arbitrary); cosines are unchanged unless ``add_target_mean``."""
        out = self._combine(views).double()
        target = target.double()
        if out.shape != target.shape:
            raise ConfigError(f"align_to: the meta-embedding is {tuple(out.shape)}, the target {tuple(target.shape)}")
        self.tensors.pop("align_offset", None)
        if add_target_mean:
            offset = target.mean(0)
            out, target = out - out.mean(0), target - offset
            self.tensors["align_offset"] = offset.float()
        rotation, scale = orthogonal_procrustes(out, target)
        self.tensors["align_rotation"] = rotation.float()
        self.options["align_scale"] = scale
        return self

    def _combine(self, views: Sequence[Tensor]) -> Tensor:
        check_views(views, self.dims)
        views = [v.float() for v in views]
        if self.method == "conc":
            return concatenate(views)
        if self.method == "avg":
            return average(views)
        if self.method == "svd":
            return (concatenate(views) - self.tensors["mean"]) @ self.tensors["components"]
        if self.method == "gcca":
            return sum((v - self.tensors[f"mean_{j}"]) @ self.tensors[f"theta_{j}"] for j, v in enumerate(views))
        if self.method == "ae":
            if self.autoencoder is None:
                raise ConfigError("meta-embedding 'ae' has no trained autoencoder")
            with torch.no_grad():
                return self.autoencoder.eval().embed(views)
        raise ConfigError(f"unknown meta-embedding method {self.method!r}; valid: {list(METHODS)}")

    @property
    def output_dim(self) -> int:
        if self.method == "conc":
            return sum(self.dims)
        if self.method == "avg":
            return max(self.dims)
        return int(self.options["d"])


def fit_meta(method: str, views: Sequence[Tensor], d: int | None = None, tau: float = 0.1) -> MetaProjection:
    """Fit ``method`` (conc / avg / svd / gcca) on the fitting corpus; ``d`` defaults to the largest dim."""
    check_views(views)
    dims = [int(v.shape[1]) for v in views]
    d = int(d or max(dims))
    if method in NAIVE:
        return MetaProjection(method, dims)
    if method == "svd":
        return MetaProjection(method, dims, {"d": d}, fit_svd(views, d))
    if method == "gcca":
        return MetaProjection(method, dims, {"d": d, "tau": float(tau)}, fit_gcca(views, d, tau))
    if method == "ae":
        raise ConfigError("meta-embedding 'ae' is trained: use lightning_modules.cross_view_ae.fit_cross_view_ae")
    raise ConfigError(f"unknown meta-embedding method {method!r}; valid: {list(METHODS)}")
