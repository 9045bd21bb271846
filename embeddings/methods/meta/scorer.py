"""Meta-embeddings as scorers and sources, and their export format: the fitted tensors and the source specs
``build_source`` rebuilds (referenced, not copied; one whose files changed since is refused at load).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.export_dir import ExportFormat, load_export, save_export
from sts_lightning.embeddings.io.export_note import EXPORT, LoadingNote, evaluate_command
from sts_lightning.embeddings.io.model_card import ModelCard, TrainingFacts
from sts_lightning.embeddings.methods.declaration import MethodInfo
from sts_lightning.embeddings.methods.meta import METHOD
from sts_lightning.embeddings.methods.meta.cross_view_ae_nets import CrossViewAutoencoder
from sts_lightning.embeddings.methods.meta.projections import MetaProjection, l2_normalize
from sts_lightning.embeddings.scoring.scorer import Representation, Scorer, VectorScorer
from sts_lightning.embeddings.scoring.similarity import cosine_rows
from sts_lightning.embeddings.sources.cache import cached_source_vectors
from sts_lightning.embeddings.sources.sentence_source import SentenceSource

FORMAT, FORMAT_VERSION = METHOD.export, 1  # "sts-lightning/meta-embedding", declared once (meta/__init__.py)
CONFIG_FILE, WEIGHTS_FILE = "meta_config.json", "meta.safetensors"
EXPORT_FORMAT = ExportFormat(FORMAT, FORMAT_VERSION, CONFIG_FILE, WEIGHTS_FILE, "meta-embedding")


def meta_method(projection: str) -> MethodInfo:
    """The card's method of a meta-embedding fitted by ``sts_lightning.fit_meta`` (``svd``, ``gcca``, ``ae`` ...)."""
    return MethodInfo(f"{METHOD.name}_{projection}", f"{METHOD.title} ({projection})", METHOD.paper)


def is_meta_export(path: str | os.PathLike) -> bool:
    return (Path(str(path)).expanduser() / CONFIG_FILE).is_file()


class MetaEmbeddingScorer(VectorScorer):
    """Every source embeds the sentences (``cache_dir``: through ``embeddings.sources.cache``); the projection combines
    them; cosine compares."""

    def __init__(self, sources: Sequence[SentenceSource], projection: MetaProjection,
                 cache_dir: str | os.PathLike | None = None) -> None:
        dims = [s.dim for s in sources]
        if dims != projection.dims:
            raise ConfigError(f"the sources give {dims}-d vectors, the meta-embedding was fitted on {projection.dims}")
        self.sources, self.projection, self.cache_dir = list(sources), projection, cache_dir
        self.name = f"meta-{projection.method}"

    def views(self, sentences: Sequence[str]) -> list[torch.Tensor]:
        if self.cache_dir is None:
            return [s.embed(sentences) for s in self.sources]
        return [torch.from_numpy(cached_source_vectors(s, sentences, self.cache_dir)) for s in self.sources]

    def represent(self, sentences: Sequence[str]) -> Representation:
        return {"embedding": self.projection.apply(self.views(sentences))}


def source_spec_mapping(spec: str | Mapping) -> dict:
    """A source spec as the mapping the export stores: a plain name ``x`` becomes ``{model: x}``."""
    mapping = {"model": spec} if isinstance(spec, str) else dict(spec) if isinstance(spec, Mapping) else {}
    if "model" not in mapping:
        raise ConfigError(f"source spec {spec!r} is neither a model name nor a mapping with a 'model' key")
    return mapping


def save_meta_embedding(path: str | os.PathLike, projection: MetaProjection, sources: Sequence[str | Mapping],
                        method: MethodInfo | None = None, training: TrainingFacts | None = None,
                        fitted_on: Sequence[Mapping | None] | None = None) -> Path:
    """Write the export directory atomically, with its ``LOADING.md`` and model card; ``fitted_on`` holds each
    source's ``identity()`` when fitted (``None``: the sources cannot be checked)."""
    if len(sources) != len(projection.dims):
        raise ConfigError(f"{len(sources)} source specs for a meta-embedding of {len(projection.dims)} sources")
    if fitted_on is not None and len(fitted_on) != len(sources):
        raise ConfigError(f"{len(fitted_on)} source identities for {len(sources)} source specs")
    tensors = dict(projection.tensors)
    if projection.method == "ae":
        if projection.autoencoder is None:
            raise ConfigError("meta-embedding 'ae' has no trained autoencoder to export")
        tensors.update({f"ae.{k}": v for k, v in projection.autoencoder.state_dict().items()})
    meta = {"method": projection.method, "dims": projection.dims,
            "options": projection.options, "sources": [source_spec_mapping(s) for s in sources],
            "autoencoder": projection.autoencoder.config() if projection.autoencoder is not None else None,
            "source_encoders": None if fitted_on is None else [None if f is None else dict(f) for f in fitted_on]}
    names = ", ".join(f"`{s['model']}`" for s in meta["sources"])
    note = LoadingNote(f"Meta-embedding `{projection.method}` of {len(sources)} frozen sources ({names}; "
                       "referenced, not copied), compared by cosine.",
                       evaluate_command(["none"], f"{{name:meta,path:{EXPORT}}}"),
                       "it combines the vectors of several separate encoders")
    card = ModelCard(method or meta_method(projection.method), tuple(dict.fromkeys(str(s["model"]) for s in meta["sources"])),
                     note, training, encoder_snippet=False)
    return save_export(path, EXPORT_FORMAT, meta, tensors, card)


class MetaExport(NamedTuple):
    """A loaded meta-embedding export: the projection, its source specs and what each source was when fitted
    (``None``: an export older than recorded identities)."""

    projection: MetaProjection
    specs: list[dict]
    fitted_on: list[dict | None] | None


def load_meta_export(path: str | os.PathLike) -> MetaExport:
    """The projection, source specs and recorded source identities of an export directory."""
    config, tensors = load_export(path, EXPORT_FORMAT)
    projection = MetaProjection(config["method"], [int(d) for d in config["dims"]], dict(config["options"]))
    if config["method"] == "ae":
        ae = CrossViewAutoencoder(**config["autoencoder"])
        ae.load_state_dict({k.removeprefix("ae."): v for k, v in tensors.items() if k.startswith("ae.")})
        projection.autoencoder = ae.eval()
    projection.tensors = {k: v for k, v in tensors.items() if not k.startswith("ae.")}
    fitted_on = config.get("source_encoders")
    return MetaExport(projection, list(config["sources"]), None if fitted_on is None else list(fitted_on))


class StandardisedCosineEnsemble(Scorer):
    """Score-level ensemble, the baseline a meta-embedding has to beat: the mean of the sources' cosines, each z-scored
    over random sentence pairs of the fitting corpus (``fit``: E5's cosines live in 0.7-1.0)."""

    def __init__(self, sources: Sequence[SentenceSource]) -> None:
        self.sources = list(sources)
        self.stats = torch.tensor([[0.0, 1.0]] * len(self.sources))
        self.name = "avg-std-cosine"

    def fit(self, views: Sequence[torch.Tensor], pairs: int = 20000, seed: int = 0) -> StandardisedCosineEnsemble:
        g = torch.Generator().manual_seed(seed)
        n = int(views[0].shape[0])
        a, b = torch.randint(n, (pairs,), generator=g), torch.randint(n, (pairs,), generator=g)
        cos = [cosine_rows(v[a].float(), v[b].float()) for v in views]
        self.stats = torch.tensor([[float(c.mean()), float(c.std())] for c in cos])
        return self

    def represent(self, sentences: Sequence[str]) -> Representation:
        return {f"v{j}": l2_normalize(s.embed(sentences).float()) for j, s in enumerate(self.sources)}

    def similarity(self, a: Representation, b: Representation) -> torch.Tensor:
        z = [((a[f"v{j}"] * b[f"v{j}"]).sum(-1) - m) / s for j, (m, s) in enumerate(self.stats.tolist())]
        return torch.stack(z).mean(0)


class MeanEnsembleScorer(VectorScorer):
    """The full ensemble of same-size sources: the mean of their raw vectors (SED's target, Eq. 1), by cosine."""

    def __init__(self, sources: Sequence[SentenceSource]) -> None:
        dims = {s.dim for s in sources}
        if len(dims) != 1:
            raise ConfigError(f"a mean ensemble needs sources of one size, got {sorted(dims)}")
        self.sources, self.name = list(sources), f"mean-ensemble-{len(sources)}"

    def represent(self, sentences: Sequence[str]) -> Representation:
        return {"embedding": torch.stack([s.embed(sentences).float() for s in self.sources]).mean(0)}
