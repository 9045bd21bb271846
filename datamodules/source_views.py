"""Cached vectors of several frozen sentence sources over one corpus: the data of the cross-view AE.

Training touches only the sources' outputs, so the corpus is encoded once per source (``embeddings.sources.cache``).
Each batch is a list of J tensors, one per source.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from torch.utils.data import DataLoader, TensorDataset

from sts_lightning.datamodules.loader import ResumableDataModule
from sts_lightning.datamodules.sentence_files import SentenceIndex, mean_chars, source_paths
from sts_lightning.embeddings.console import phase
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.cache_root import cache_dir_or_root
from sts_lightning.embeddings.sources.build import build_source
from sts_lightning.embeddings.sources.cache import cached_source_vectors, pending_sources
from sts_lightning.embeddings.sources.names import spec_model
from sts_lightning.embeddings.stop_request import stretch

log = logging.getLogger(__name__)


class SourceViewsDataModule(ResumableDataModule):
    """Batches ``[x_1 (B, d_1), ..., x_J (B, d_J)]`` of cached source vectors, ``sources`` in the model's order."""

    data_unit = "sentences"  # model card: one training item

    def __init__(self, sources: Sequence, data_dir: str | None = None,
                 files: Sequence[str] | str = ("onebillion/1b_benchmark.dev.tokens",
                                               "onebillion/1b_benchmark.test.tokens"), batch_size: int = 10000,
                 max_sentences: int | None = None, min_words: int = 1, max_words: int | None = 59,
                 cache_dir: str | None = None, num_workers: int = 0, seed: int = 0, shuffle: bool = True,
                 encode_batch_size: int = 64, encode_device: str = "cpu") -> None:
        super().__init__()
        if not sources:
            raise ConfigError("data.sources: list at least one sentence source")
        self.sources = [s if isinstance(s, str) else dict(s) for s in sources]
        self.data_dir, self.files = data_dir, [files] if isinstance(files, str) else [str(f) for f in files]
        self.batch_size, self.max_sentences = batch_size, max_sentences
        self.min_words, self.max_words, self.num_workers = min_words, max_words, num_workers
        self.seed, self.shuffle = seed, shuffle
        self.encode_batch_size, self.encode_device = encode_batch_size, encode_device
        self.cache_dir = cache_dir_or_root(cache_dir)
        self.dataset: TensorDataset | None = None

    def _sentences(self) -> list[str]:
        paths = source_paths(self.files, self.data_dir, self.cache_dir, self.max_sentences)
        index = SentenceIndex.build(paths, self.cache_dir, self.min_words, self.max_words, self.max_sentences)
        return [index.sentence(i) for i in range(len(index))]

    def _views(self) -> list[torch.Tensor]:
        sentences = self._sentences()
        views = []
        n = len(self.sources)
        # one counter over every source's pass (a cached source counts as done): embeddings.console.phase
        with phase(f"source views ({n} x {len(sentences):,} sentences)", n * len(sentences)) as counter:
            for spec in self.sources:
                # named for the stopped: line (SIGTERM while encoding cross-view AE source all-MiniLM-L6-v2); the
                # phase's counter checks for a stop before each source and between its batches, whatever its engine
                with stretch(f"encoding cross-view AE source {spec_model(spec)}"), counter.part(len(sentences)):
                    source = build_source(spec, batch_size=self.encode_batch_size, device=self.encode_device)
                    views.append(torch.from_numpy(cached_source_vectors(source, sentences, self.cache_dir)))
        return views

    def pending_encodes(self) -> list[tuple[str, str, int, float]]:
        """``(what, encoder, sentences, mean characters)`` per uncached source (for ``runs.first_step``)."""
        sentences = self._sentences()
        return [("source vectors", spec_model(spec), len(sentences), mean_chars(sentences))
                for spec in pending_sources(self.sources, sentences, self.cache_dir)]

    def prepare_data(self) -> None:
        self._views()  # encodes once per node; later calls read the caches

    def setup(self, stage: str | None = None) -> None:
        if self.dataset is None:
            self.dataset = TensorDataset(*self._views())
            log.info("source views: %d sentences, dims %s", len(self.dataset), self.dims)

    @property
    def dims(self) -> list[int]:
        return [int(t.shape[1]) for t in self.ready_dataset().tensors]

    def train_dataloader(self) -> DataLoader:
        return self.resumable_loader()
