"""Sentences streamed with ``datasets``' streaming engine (``data.streaming=true``): never written to disk.

``datasets`` streams, shuffles in a seeded buffer and splits by rank. A stream's length is unknown, so it is endless
(reshuffled passes) and training ends at ``trainer.max_steps``; a resume re-reads and drops the done batches.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from torch.utils.data import IterableDataset, get_worker_info

from sts_lightning.datamodules.sentence_files import hub_parts
from sts_lightning.datamodules.table_files import BUILDERS, data_files, refuse_local_hub, resolve_path
from sts_lightning.embeddings.errors import ConfigError, DataError


def stream_opener(files: Sequence[str], data_dir: str | None, columns: Mapping[str, str] | None = None
                  ) -> tuple[Callable[[], Any], str]:
    """(a function returning a fresh ``datasets.IterableDataset`` of the sources, its text column)."""
    from datasets import load_dataset

    column = dict(columns or {}).get("text", "text")
    hub = [f for f in files if f.startswith("hub:")]
    if hub:
        if len(files) != 1:
            raise ConfigError(f"data.streaming=true reads one hub: source or local files, not {list(files)}")
        name, config, split = hub_parts(hub[0])
        refuse_local_hub(hub[0], name)
        return lambda: load_dataset(name, config, split=split, streaming=True), column
    paths = [str(p) for f in files for p in data_files(resolve_path(f, data_dir), text_ok=True)]
    builders = {BUILDERS.get("." + p.rsplit(".", 1)[-1].lower(), "text") for p in paths}
    if len(builders) != 1:
        raise ConfigError(f"data.streaming=true streams files of one kind at a time, got {sorted(builders)}")
    (builder,) = builders
    return lambda: load_dataset(builder, data_files=paths, split="train", streaming=True), column


class StreamedSentences(IterableDataset):
    """This rank's endless stream of usable sentences, one reshuffled pass after another."""

    def __init__(self, open_rows: Callable[[], Any], column: str, per_device_batch: int, rank: int = 0,
                 world_size: int = 1, num_workers: int = 0, seed: int = 0, shuffle: bool = True,
                 buffer_size: int = 10_000, min_words: int = 1, max_words: int | None = None):
        if num_workers:
            raise ConfigError(f"data.streaming=true reads in the main process: set data.num_workers=0, "
                              f"not {num_workers}")
        self.open_rows, self.column, self.batch = open_rows, column, per_device_batch
        self.rank, self.world_size, self.num_workers = rank, world_size, 0
        self.seed, self.shuffle, self.buffer_size = seed, shuffle, buffer_size
        self.min_words, self.max_words = min_words, max_words
        self.epoch, self.skip_batches = 0, 0

    def set_epoch(self, epoch: int, skip_batches: int = 0) -> None:
        if skip_batches < 0:
            raise ValueError(f"skip_batches must be >= 0, got {skip_batches}")
        self.epoch, self.skip_batches = int(epoch), int(skip_batches)

    def one_pass(self, p: int) -> Iterator[str]:
        """The usable sentences of this rank's part of pass ``p``."""
        from datasets.distributed import split_dataset_by_node

        rows = self.open_rows()
        if self.shuffle:
            rows = rows.shuffle(seed=self.seed, buffer_size=self.buffer_size)
        rows = split_dataset_by_node(rows, rank=self.rank, world_size=self.world_size)
        rows.set_epoch(p)  # after the split: it does not carry the epoch over
        for row in rows:
            if self.column not in row:
                raise DataError(f"streamed rows have no column {self.column!r} (columns: {sorted(row)}); "
                                "set data.columns={text: <column>}")
            words = str(row[self.column] or "").split()
            if words and len(words) >= self.min_words and (self.max_words is None or len(words) <= self.max_words):
                yield " ".join(words)

    def sentences(self) -> Iterator[str]:
        """Pass ``epoch``, ``epoch + 1``, ... one after another, without end."""
        for p in itertools.count(self.epoch):
            empty = True
            for sentence in self.one_pass(p):
                empty = False
                yield sentence
            if empty:
                raise DataError(f"rank {self.rank} of {self.world_size}: no usable sentences in its part of the "
                                "stream")

    def __iter__(self) -> Iterator[str]:
        if get_worker_info() is not None:
            raise ConfigError("data.streaming=true reads in the main process: set data.num_workers=0")
        return itertools.islice(self.sentences(), self.skip_batches * self.batch, None)
