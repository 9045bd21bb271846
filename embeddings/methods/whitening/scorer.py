"""BERT-whitening's scorer: frozen pooled vector -> ``(x - mu) @ W``, compared by cosine; its export format, which
references the frozen encoder and refuses another one."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from torch import Tensor

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.encoder_identity import check_fitted_on
from sts_lightning.embeddings.io.export_dir import ExportFormat, load_export, save_export
from sts_lightning.embeddings.io.model_card import ExportNotes
from sts_lightning.embeddings.methods.pooling import get_pooling
from sts_lightning.embeddings.methods.whitening import METHOD
from sts_lightning.embeddings.methods.whitening.maths import whiten
from sts_lightning.embeddings.scoring.reading import Reading, pooled_reading
from sts_lightning.embeddings.scoring.scorer import Representation, VectorScorer

log = logging.getLogger(__name__)

FORMAT, FORMAT_VERSION = METHOD.export, 1  # declared in whitening/__init__.py; never change a released tag: bump the version
EXPORT_FORMAT = ExportFormat(FORMAT, FORMAT_VERSION, "whitening_config.json", "whitening.safetensors", "whitening")
CONFIG_KEYS = ("model_name_or_path", "pooling", "max_length", "k", "encoder")
BERT_WHITENING = METHOD.card()


class Whitening:
    """A fitted ``(mu, W)`` and its export config (``CONFIG_KEYS``): applies itself to vectors, checks an encoder."""

    def __init__(self, mean: Tensor, matrix: Tensor, config: Mapping, source: str = "the live fit") -> None:
        self.mean, self.matrix, self.config, self.source = mean, matrix, dict(config), source

    @property
    def pooling(self) -> str:
        return str(self.config["pooling"])

    def check_encoder(self, encoder: BaseEncoder, allow_other_encoder: bool = False) -> None:
        """ConfigError when ``encoder`` is not the one fitted on (``check_fitted_on``; ``allow_other_encoder``: a warning)."""
        recorded = self.config.get("encoder") or {"hidden_size": self.matrix.shape[0]}
        check_fitted_on(recorded, encoder, f"whitening {self.source}", allow_other_encoder)

    def to(self, device: torch.device | str) -> Whitening:
        self.mean, self.matrix = self.mean.to(device), self.matrix.to(device)
        return self

    def __call__(self, x: Tensor) -> Tensor:
        """``(x - mu) @ W`` of pooled vectors ``(n, d)`` -> ``(n, k)``, float32 like the scorers' vectors."""
        with torch.autocast(device_type=self.matrix.device.type, enabled=False):
            return whiten(x, self.mean, self.matrix).float()


class WhiteningScorer(VectorScorer):
    """Pools with the frozen encoder, whitens; a ``ReadingScorer``, so the shared pass pools once for it and the
    poolings."""

    def __init__(self, encoder: BaseEncoder, whitening: Whitening, batch_size: int | None = None,
                 allow_other_encoder: bool = False) -> None:
        whitening.check_encoder(encoder, allow_other_encoder)
        self.encoder, self.whitening = encoder, whitening.to(encoder.device)
        self.pooling = whitening.pooling
        self.pool_fn = get_pooling(self.pooling)
        self.batch_size = batch_size
        self.name = f"whitening-{self.pooling}"

    def reading(self) -> Reading:
        return pooled_reading(self.pooling, self.pool_fn)

    def from_pooled(self, x: torch.Tensor) -> Representation:
        return {"embedding": self.whitening(x).cpu()}

    def represent(self, sentences: Sequence[str]) -> Representation:
        return self.from_pooled(self.encoder.encode(sentences, self.pool_fn, batch_size=self.batch_size,
                                                    desc=f"{self.name} encode"))  # type: ignore[arg-type]


def save_whitening_export(path: str | os.PathLike, whitening: Whitening, note: ExportNotes | None = None) -> Path:
    """Write ``whitening_config.json`` + ``whitening.safetensors`` (and ``note``) to ``path`` atomically."""
    missing = set(CONFIG_KEYS) - set(whitening.config)
    if missing:
        raise ConfigError(f"whitening export config lacks {sorted(missing)}")
    config = {**whitening.config, "dim": int(whitening.matrix.shape[0]), "out_dim": int(whitening.matrix.shape[1])}
    target = save_export(path, EXPORT_FORMAT, config, {"mean": whitening.mean.float(),
                                                       "matrix": whitening.matrix.float()}, note)
    log.info("exported whitening to %s", target)
    return target


def load_whitening(path: str | os.PathLike) -> Whitening:
    """The ``Whitening`` of an export directory (CPU, float32); ConfigError for a missing or foreign export."""
    config, tensors = load_export(path, EXPORT_FORMAT)
    if set(tensors) != {"mean", "matrix"} or tensors["matrix"].shape[0] != tensors["mean"].shape[0]:
        raise ConfigError(f"{path}: a whitening export needs tensors mean (d,) and matrix (d, k), "
                          f"got {sorted(tensors)}")
    return Whitening(tensors["mean"], tensors["matrix"], config, source=f"export {Path(path) / EXPORT_FORMAT.config_file}")


def whitening_for(path: str | os.PathLike, encoder: BaseEncoder, pooling: str, who: str) -> Whitening:
    """An export's ``Whitening`` checked for another scorer ``who`` (Sen2Pro) on ``encoder`` with ``pooling``."""
    whitening = load_whitening(path)
    if whitening.pooling != pooling:
        raise ConfigError(f"{who} pooling={pooling!r}, but whitening export {str(path)!r} was fitted on "
                          f"{whitening.pooling!r} vectors: set pooling={whitening.pooling}")
    whitening.check_encoder(encoder)
    return whitening.to(encoder.device)


class WhiteningExportScorer(WhiteningScorer):
    """Registry entry ``{name: whitening, path: <export dir>}``: an export on the configured encoder (checked first)."""

    def __init__(self, encoder: BaseEncoder, path: str, batch_size: int | None = None,
                 allow_other_encoder: bool = False) -> None:
        super().__init__(encoder, load_whitening(path), batch_size=batch_size, allow_other_encoder=allow_other_encoder)
