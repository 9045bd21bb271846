"""Sen2Pro (Shen et al. 2023): a sentence as a distribution (mean, variance) estimated from a frozen encoder.

N MC-dropout passes (model uncertainty, Eq. 1) and N augmented copies (data, Eq. 2) give a mean and a diagonal
covariance each (Eq. 3-5), averaged over the sources (App. D); the distance is Eq. 7. Alpha: ``"paper"`` (Eq. 8 per
pair), ``"dataset"`` (Eq. 8 over the call's pairs), ``"inverse"`` (the inverse ratio, in the paper's 0.01-0.05
range) or a fixed float (default 0.05: a pair's score depends on no other pair). Eq. 8 as printed inverts the
ranking: docs/results/sen2pro.md. An encoder without ``stochastic()`` gets one pass and a zero model variance.
"""

from __future__ import annotations

import numbers
import time
from collections.abc import Sequence

import torch
from tqdm.auto import tqdm

from sts_lightning.embeddings.encoders.base import PROGRESS_MIN_SENTENCES, BaseEncoder
from sts_lightning.embeddings.errors import ConfigError, UnsupportedError, unknown_choice
from sts_lightning.embeddings.methods.pooling import get_pooling
from sts_lightning.embeddings.methods.sen2pro.augment import OPS, augment, stable_seed, validate_ops
from sts_lightning.embeddings.methods.sen2pro.mc_dropout import mc_dropout
from sts_lightning.embeddings.methods.whitening.scorer import whitening_for
from sts_lightning.embeddings.scoring.reading import pooled_reading
from sts_lightning.embeddings.scoring.scorer import Representation, Scorer

SOURCES = ("model", "data")
ALPHA_MODES = ("paper", "dataset", "inverse")


def banded_moments(samples: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean (Eq. 3) and banded covariance diagonal (Eq. 4-5) of ``(N, n, d)`` samples -> two ``(n, d)``.

    Population variance (divide by N); float64 because the variances are small differences of large values.
    """
    x = samples.double()
    mu = x.mean(0)
    var = ((x - mu) ** 2).mean(0)
    return mu.float(), var.float()


class RunningMoments:
    """``banded_moments`` of samples added one ``(n, d)`` tensor at a time (no ``(N, n, d)`` stack).

    Float64 sums of the samples minus the first one: the shift keeps small variances exact (no cancellation).
    """

    def __init__(self) -> None:
        self.count = 0

    def add(self, x: torch.Tensor) -> None:
        x = x.double()
        if self.count == 0:
            self.shift, self.sum, self.sum_sq = x, torch.zeros_like(x), torch.zeros_like(x)
        else:
            dx = x - self.shift
            self.sum += dx
            self.sum_sq += dx * dx
        self.count += 1

    def result(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean (Eq. 3) and population variance (Eq. 4-5) as float32."""
        if self.count == 0:
            raise ValueError("no samples added")
        m = self.sum / self.count
        var = (self.sum_sq / self.count - m * m).clamp_min_(0.0)
        return (self.shift + m).float(), var.float()


def balance_alpha(dmu: torch.Tensor, dvar: torch.Tensor, alpha: str | float) -> torch.Tensor:
    """Alpha per pair (broadcastable to ``dmu``) for the given mode; 0 where Eq. 8 divides by 0."""
    if alpha == "paper":
        return torch.where(dvar > 0, dmu / dvar.clamp_min(torch.finfo(dvar.dtype).tiny), torch.zeros_like(dmu))
    if alpha == "dataset":
        den = dvar.mean()
        return dmu.mean() / den if den > 0 else torch.zeros((), dtype=dmu.dtype)
    if alpha == "inverse":
        den = dmu.mean()
        return (dvar.mean() / den).clamp(max=1.0) if den > 0 else torch.zeros((), dtype=dmu.dtype)
    return torch.tensor(float(alpha), dtype=dmu.dtype)


def l1_gaps(a: Representation, b: Representation) -> tuple[torch.Tensor, torch.Tensor]:
    """Row-wise ``l1(mu_a - mu_b)`` and ``l1(var_a - var_b)`` in float64."""
    dmu = (a["mean"].double() - b["mean"].double()).abs().sum(-1)
    dvar = (a["var"].double() - b["var"].double()).abs().sum(-1)
    return dmu, dvar


def check_alpha(alpha: object) -> str | float:
    """One of ``ALPHA_MODES`` or a real number in [0, 1]; anything else is a ConfigError."""
    if isinstance(alpha, str) and alpha in ALPHA_MODES:
        return alpha
    if isinstance(alpha, (str, bool)) or not isinstance(alpha, numbers.Real) or not 0.0 <= float(alpha) <= 1.0:
        raise ConfigError(f"sen2pro alpha {alpha!r}: use 'paper', 'dataset', 'inverse' or a number in [0, 1]")
    return float(alpha)


def check_uncertainty(uncertainty: str | Sequence[str]) -> tuple[str, ...]:
    """Sources as a tuple; a string may join them with '+' (``"model+data"``) for command lines."""
    items = uncertainty.split("+") if isinstance(uncertainty, str) else list(uncertainty)
    sources = tuple(dict.fromkeys(str(s).strip() for s in items))
    if not sources:
        raise ConfigError("sen2pro uncertainty: name at least one of 'model', 'data'")
    for s in sources:
        if s not in SOURCES:
            raise unknown_choice("sen2pro uncertainty source", s, SOURCES)
    return sources


class Sen2ProScorer(Scorer):
    """Probabilistic sentence embedding: ``{"mean", "var"}`` per sentence, compared by Eq. 7.

    ``n_samples`` is N per uncertainty source; ``whitening`` (Table 1), the path of a BERT-whitening export, whitens
    every sample before the moments are taken.
    """

    name = "sen2pro"

    def __init__(self, encoder: BaseEncoder, pooling: str = "first_last_avg", n_samples: int = 15,
                 uncertainty: str | Sequence[str] = ("model", "data"), alpha: str | float = 0.05,
                 seed: int = 0, batch_size: int | None = None, ops: Sequence[str] = OPS,
                 vocabulary: Sequence[str] | None = None, normalize: bool = False,
                 fast_dropout: bool = True, whitening: str | None = None) -> None:
        if isinstance(n_samples, bool) or not isinstance(n_samples, numbers.Integral) or n_samples < 2:
            raise ConfigError(f"sen2pro n_samples must be an integer >= 2 (a variance needs two samples), "
                              f"got {n_samples!r}")
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise ConfigError(f"sen2pro seed must be an integer, got {seed!r}")
        self.pool_fn = get_pooling(pooling)  # not ``pool``: shared_pass would take this for a pooling scorer
        if pooling == "cls" and not getattr(encoder, "has_cls_token", True):
            raise UnsupportedError(f"pooling 'cls' needs an encoder with a [CLS] token; {encoder.name} has none")
        self.encoder = encoder
        self.pooling = pooling
        self.n_samples = int(n_samples)
        self.uncertainty = check_uncertainty(uncertainty)
        self.alpha = check_alpha(alpha)
        self.seed = int(seed)
        self.batch_size = batch_size
        self.ops = validate_ops(ops)
        self.vocabulary = None if vocabulary is None else tuple(vocabulary)
        self.normalize = bool(normalize)
        self.fast_dropout = bool(fast_dropout)
        self.whitening = None if whitening is None else whitening_for(whitening, encoder, pooling, "sen2pro")
        self.last_seconds: dict[str, float] = {}  # wall time per source of the latest ``represent``
        self.last_stats: dict[str, str] = {}
        self.last_alpha: torch.Tensor | None = None  # alpha(s) of the latest ``similarity`` call
        self.readings = None  # a ReadingStore for the deterministic passes (``use_readings``)

    def use_readings(self, store) -> None:
        """Take the eval-mode passes' pooled vectors from ``store``; MC-dropout passes always run."""
        self.readings = store

    @property
    def _has_dropout(self) -> bool:
        return type(self.encoder).stochastic is not BaseEncoder.stochastic

    def _encode(self, sentences: Sequence[str], show_progress: bool | None = False,
                deterministic: bool = True) -> torch.Tensor:
        if deterministic and self.readings is not None:
            out = self.readings.pooled(pooled_reading(self.pooling, self.pool_fn), sentences, self.batch_size)
        else:
            out = self.encoder.encode(sentences, self.pool_fn, batch_size=self.batch_size,
                                      show_progress=show_progress, desc=f"{self.name} augmented copies")
        if self.whitening is not None:
            out = self.whitening(out)
        return torch.nn.functional.normalize(out, dim=-1) if self.normalize else out  # type: ignore[arg-type]

    def _model_moments(self, sentences: Sequence[str], bar: tqdm) -> tuple[torch.Tensor, torch.Tensor]:
        """Moments of N seeded MC-dropout passes; the caller's RNG state is untouched."""
        if not self._has_dropout:
            bar.update(self.n_samples)
            x = self._encode(sentences)
            return x, torch.zeros_like(x)
        device = self.encoder.device
        cuda = [device.index or 0] if device.type == "cuda" else []
        moments = RunningMoments()
        with torch.random.fork_rng(devices=cuda), mc_dropout(self.encoder, fast=self.fast_dropout):
            for i in range(self.n_samples):
                torch.manual_seed(stable_seed("mc-dropout", self.seed, i))
                moments.add(self._encode(sentences, deterministic=False))
                bar.update(1)
        return moments.result()

    def _data_moments(self, sentences: Sequence[str], bar: tqdm) -> tuple[torch.Tensor, torch.Tensor]:
        """Moments of N augmented copies per sentence, eval mode, all copies in ONE ``encode`` call."""
        copies = augment(sentences, self.n_samples, self.seed, self.ops, self.vocabulary)
        flat = [c for row in copies for c in row]  # sentence-major: row i*N + k is copy k of sentence i
        self.last_stats["augmented copies"] = f"{len(set(flat))} distinct of {len(flat)}"
        vectors = self._encode(flat, show_progress=None).view(len(sentences), self.n_samples, -1)
        bar.update(self.n_samples)
        moments = RunningMoments()
        for k in range(self.n_samples):
            moments.add(vectors[:, k])
        return moments.result()

    def represent(self, sentences: Sequence[str]) -> Representation:
        """``{"mean": (n, d), "var": (n, d)}``, the average over the configured sources."""
        sentences = list(sentences)
        show = len(set(sentences)) >= PROGRESS_MIN_SENTENCES
        moments = []
        self.last_seconds, self.last_stats = {}, {}
        with tqdm(total=self.n_samples * len(self.uncertainty), desc=f"{self.name} passes", unit="pass",
                  disable=not show) as bar:
            for source in self.uncertainty:
                start = time.perf_counter()
                estimate = self._model_moments if source == "model" else self._data_moments
                moments.append(estimate(sentences, bar))
                self.last_seconds[source] = time.perf_counter() - start
        mean = torch.stack([m for m, _ in moments]).mean(0)
        var = torch.stack([v for _, v in moments]).mean(0)
        return {"mean": mean, "var": var}

    def similarity(self, a: Representation, b: Representation) -> torch.Tensor:
        """Negative Eq. 7 distance of aligned rows (so higher = more similar)."""
        dmu, dvar = l1_gaps(a, b)
        w = balance_alpha(dmu, dvar, self.alpha)
        self.last_alpha = w
        return -((1 - w) * dmu + w * dvar).float()
