"""Frozen-encoder sentence vectors, encoded once into a ``.npy`` cache and served as a map-style dataset.

A head trained on a FROZEN encoder (BERT-flow's Glow) would otherwise re-encode every sentence every step; the
cache is named by everything that changes the vectors.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from sts_lightning.datamodules.loader import (
    ResumableDataModule,
)
from sts_lightning.datamodules.sentence_files import SentenceIndex, mean_chars, source_paths
from sts_lightning.embeddings.console import phase
from sts_lightning.embeddings.encoders.hf import resolve_device
from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.encoders.precision import key_entry, resolve_precision
from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.io.cache_root import cache_dir_or_root
from sts_lightning.embeddings.io.fingerprint import (  # model_fingerprint: re-exported (old home)
    file_stat,
    model_fingerprint,
)
from sts_lightning.embeddings.io.npy_cache import (
    key_digest,
    npy_cache_problem,
    npy_cache_writer,
    open_npy_memmap,
)
from sts_lightning.embeddings.methods.pooling import get_pooling
from sts_lightning.embeddings.stop_request import stretch

log = logging.getLogger(__name__)
CACHE_VERSION = 1


class CachedEmbeddingDataModule(ResumableDataModule):
    """Batches ``[vectors (per_device_batch, dim)]`` of frozen pooled sentence embeddings, cached once per node."""

    data_unit = "sentences"  # model card: one training item

    def __init__(self, data_dir: str | None = None, files: Sequence[str] | str = ("wiki/wiki_sentences_100k.txt",),
                 model_name_or_path: str = "all-MiniLM-L6-v2", pooling: str = "first_last_avg",
                 max_length: int | None = None, batch_size: int = 64, cache_dir: str | None = None,
                 max_sentences: int | None = None, num_workers: int = 0, seed: int = 0, shuffle: bool = True,
                 min_words: int = 1, max_words: int | None = None, encode_batch_size: int = 64,
                 encode_device: str = "auto", chunk_size: int = 8192, encode_precision: str = "fp32") -> None:
        super().__init__()
        get_pooling(pooling)  # fail at construction, not after encoding
        self.data_dir, self.files = data_dir, [files] if isinstance(files, str) else [str(f) for f in files]
        self.model_name_or_path, self.pooling, self.max_length = str(model_name_or_path), pooling, max_length
        self.batch_size, self.num_workers, self.seed, self.shuffle = batch_size, num_workers, seed, shuffle
        self.max_sentences, self.min_words, self.max_words = max_sentences, min_words, max_words
        self.encode_batch_size, self.encode_device, self.chunk_size = encode_batch_size, encode_device, chunk_size
        self.encode_precision = resolve_precision(encode_precision, resolve_device(encode_device))
        self.cache_dir = cache_dir_or_root(cache_dir)
        self.dataset: TensorDataset | None = None

    # ---------------------------------------------------------------------------------- the cache
    def _paths(self) -> list[Path]:
        return source_paths(self.files, self.data_dir, self.cache_dir, self.max_sentences)

    def cache_key(self) -> dict:
        """Everything that changes the cached vectors (plain JSON)."""
        return {"version": CACHE_VERSION, "model": model_fingerprint(self.model_name_or_path),
                "pooling": self.pooling, "max_length": self.max_length,
                "files": [file_stat(p) for p in self._paths()], "max_sentences": self.max_sentences,
                "min_words": self.min_words, "max_words": self.max_words, **key_entry(self.encode_precision)}

    def cache_path(self, key: dict | None = None) -> Path:
        """``<cache_dir>/features/<hash of the key>.npy``; the sidecar is the same name with ``.json``."""
        digest = key_digest(key or self.cache_key())
        return self.cache_dir / "features" / f"{Path(self.model_name_or_path).name}.{self.pooling}.{digest}.npy"

    @staticmethod
    def check_cache(path: Path, key: dict) -> str:
        """Why ``path`` cannot be used (``""`` if it can): missing, other key, truncated, unreadable."""
        return npy_cache_problem(path, {"key": key})

    def _encode_to(self, path: Path, key: dict) -> None:
        index = SentenceIndex.build(self._paths(), self.cache_dir, self.min_words, self.max_words, self.max_sentences)
        encoder = load_encoder(self.model_name_or_path, max_length=self.max_length,
                               batch_size=self.encode_batch_size, device=self.encode_device,
                               precision=self.encode_precision)
        pool, n = get_pooling(self.pooling), len(index)
        out = None
        # one counter for the whole cache, however many chunks it is encoded in (embeddings.console.phase)
        with npy_cache_writer(path, {"key": key}) as tmp, phase(f"caching features ({encoder.name})", n) as counter:
            for start in range(0, n, self.chunk_size):
                sentences = [index.sentence(i) for i in range(start, min(n, start + self.chunk_size))]
                with counter.part(len(sentences)):
                    vectors = encoder.encode(sentences, pool, desc="caching features").float().numpy()
                if out is None:
                    out = open_npy_memmap(tmp, dtype=np.float32, shape=(n, vectors.shape[1]))
                out[start:start + len(sentences)] = vectors
            out.flush()
            shape = list(out.shape)
            del out
        log.info("cached %d x %d %s features of %s in %s", *shape, self.pooling, self.model_name_or_path, path)

    def pending_encodes(self) -> list[tuple[str, str, int, float]]:
        """``(what, encoder, sentences, mean characters)`` per pass ``prepare_data`` will run (for ``runs.first_step``)."""
        key = self.cache_key()
        if not self.check_cache(self.cache_path(key), key):
            return []
        index = SentenceIndex.build(self._paths(), self.cache_dir, self.min_words, self.max_words, self.max_sentences)
        sample = [index.sentence(i) for i in range(min(len(index), 1000))]
        return [("caching features", self.model_name_or_path, len(index), mean_chars(sample))]

    def prepare_data(self) -> None:
        """Encode the sentences once per node unless a valid cache for this key exists."""
        key = self.cache_key()
        path = self.cache_path(key)
        problem = self.check_cache(path, key)
        if not problem:
            log.info("using cached features %s", path)
            return
        if problem != "missing":
            log.warning("feature cache %s is not usable (%s): rebuilding it", path, problem)
        with stretch("caching features"):  # a SIGTERM stops the encoding within a batch; nothing half-written
            self._encode_to(path, key)

    # ------------------------------------------------------------------------------------ loading
    def setup(self, stage: str | None = None) -> None:
        """Map the cache copy-on-write: pages are shared by the ranks of a node, and tensors stay writable."""
        key = self.cache_key()
        path = self.cache_path(key)
        problem = self.check_cache(path, key)
        if problem:
            raise DataError(f"feature cache {path} is not usable ({problem}): run prepare_data first")
        self.dataset = TensorDataset(torch.from_numpy(np.load(path, mmap_mode="c")))
        log.info("cached features: %s from %s", tuple(self.dataset.tensors[0].shape), path)

    @property
    def embedding_dim(self) -> int:
        return int(self.ready_dataset().tensors[0].shape[1])

    def train_dataloader(self) -> DataLoader:
        return self.resumable_loader()
