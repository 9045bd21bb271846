"""Plain sentences, one a line (Wikipedia, One Billion Word), as batches of raw strings for training.

Tables' text columns are written once into a text file (``datamodules.sentence_tables``); files are indexed by
``datamodules.sentence_files`` and sharded by rank x worker by ``datamodules.sentence_stream``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from torch.utils.data import DataLoader

from sts_lightning.datamodules.loader import ResumableDataModule, ResumableLoader, per_device_batch_size
from sts_lightning.datamodules.sentence_files import SentenceIndex, load_spans, source_paths
from sts_lightning.datamodules.sentence_stream import SentenceStream, collate_sentences
from sts_lightning.datamodules.sentence_streaming import StreamedSentences, stream_opener
from sts_lightning.datamodules.table_files import check_extension, check_roles
from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.embeddings.io.cache_root import cache_dir_or_root

log = logging.getLogger(__name__)


class SentenceDataModule(ResumableDataModule):
    """Training batches ``{"sentences": list[str]}`` from text or table files, ``hub:`` or ``sts:`` sources.

    ``heldout_sentences`` keeps the last N out of training, as ``heldout()``; ``streaming`` reads the sources with
    ``datasets`` instead of indexing them.
    """

    data_unit = "sentences"  # model card: one training item

    def __init__(self, data_dir: str | None = None, files: Sequence[str] | str = ("wiki/wiki_sentences_100k.txt",),
                 batch_size: int = 64, num_workers: int = 0, seed: int = 0, shuffle: bool = True,
                 max_sentences: int | None = None, min_words: int = 1, max_words: int | None = None,
                 cache_dir: str | None = None, columns: Mapping[str, str] | None = None,
                 max_malformed_fraction: float = 0.01, heldout_sentences: int = 0, streaming: bool = False,
                 stream_buffer: int = 10_000):
        super().__init__()
        self.data_dir, self.files = data_dir, [files] if isinstance(files, str) else [str(f) for f in files]
        for spec in self.files:
            if not spec.startswith(("hub:", "sts:")):
                check_extension(spec, text_ok=True)  # an unsupported file type fails here, before the model loads
        self.columns, self.max_bad = check_roles(columns, ("sentences",)), float(max_malformed_fraction)
        self.batch_size, self.num_workers, self.seed, self.shuffle = batch_size, num_workers, seed, shuffle
        self.max_sentences, self.min_words, self.max_words = max_sentences, min_words, max_words
        self.cache_dir = cache_dir_or_root(cache_dir)
        self.dataset: SentenceStream | StreamedSentences | None = None
        self.heldout_sentences = int(heldout_sentences)
        if self.heldout_sentences < 0:
            raise DataError(f"data.heldout_sentences={heldout_sentences!r} must be >= 0")
        self._heldout: list[str] = []
        self.streaming, self.stream_buffer = bool(streaming), int(stream_buffer)
        if self.streaming and (self.heldout_sentences or max_sentences is not None):
            raise ConfigError("data.streaming=true has no end to count from: drop data.max_sentences and "
                              "data.heldout_sentences")

    def _paths(self) -> list[Path]:
        return source_paths(self.files, self.data_dir, self.cache_dir, self.max_sentences, self.columns, self.max_bad)

    def prepare_data(self) -> None:
        """Download hub sources and index every file once per node; ``setup`` then reads the cache."""
        if self.streaming:
            return
        for path in self._paths():
            load_spans(path, self.cache_dir, self.min_words, self.max_words)

    def setup(self, stage: str | None = None) -> None:
        trainer = self.trainer
        rank, world = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        if self.streaming:
            self.dataset = self._stream(rank, world)
            return
        index = SentenceIndex.build(self._paths(), self.cache_dir, self.min_words, self.max_words,
                                    self.max_sentences)
        if self.heldout_sentences:
            index, self._heldout = index.split_tail(self.heldout_sentences)
        self.dataset = SentenceStream(index, per_device_batch_size(self.batch_size, world), rank, world,
                                      self.num_workers, self.seed, self.shuffle)
        if len(self.dataset) == 0:
            need = world * max(self.num_workers, 1) * self.dataset.batch
            raise DataError(f"{len(index)} usable sentences are fewer than one batch for every worker of "
                            f"every rank needs (world_size x max(num_workers, 1) x per-device batch = {need})")
        skipped = ", ".join(f"{n} {reason}" for reason, n in index.skipped.items()) or "none"
        log.info("sentences: %d usable (skipped: %s); %d batches per rank per epoch; %d trailing sentences "
                 "dropped per epoch so all ranks get equal batches", len(index), skipped,
                 len(self.dataset) // self.dataset.batch, self.dataset.dropped())

    def _stream(self, rank: int, world: int) -> StreamedSentences:
        if self.trainer is not None and (self.trainer.max_steps is None or self.trainer.max_steps < 0):
            raise ConfigError("data.streaming=true is an endless stream: set trainer.max_steps")
        open_rows, column = stream_opener(self.files, self.data_dir, self.columns)
        log.info("sentences: streamed from %s (rank %d of %d, shuffle buffer %d)", self.files, rank, world,
                 self.stream_buffer)
        return StreamedSentences(open_rows, column, per_device_batch_size(self.batch_size, world), rank, world,
                                 self.num_workers, self.seed, self.shuffle, self.stream_buffer, self.min_words,
                                 self.max_words)

    def heldout(self) -> list[str]:
        """The held-out sentences (``heldout_sentences``; empty when none), the same on every rank."""
        self.ready_dataset()
        return list(self._heldout)

    def data_facts(self):
        facts = super().data_facts()
        if not self._heldout:
            return facts
        note = f"held out (never trained on): the last {len(self._heldout)} usable sentences of the sources"
        return replace(facts, notes=(*facts.notes, note))

    def set_epoch(self, epoch: int) -> None:
        """For use outside a Trainer (a Trainer's current epoch wins when one is attached)."""
        if self.dataset is not None:
            self.dataset.set_epoch(epoch)

    def train_dataloader(self) -> DataLoader:
        dataset = self.ready_dataset()
        if self.num_workers > 0:
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        return ResumableLoader(dataset, batch_size=dataset.batch, num_workers=self.num_workers,
                               collate_fn=collate_sentences, persistent_workers=False, datamodule=self)
