"""Training DataLoaders that survive a mid-epoch kill: the epoch read from the Trainer, the position saved in
``last.ckpt`` and handed back on resume.

Lightning restarts a plain DataLoader from batch 0 after a mid-epoch resume, and creates the first iterator of an
epoch before it calls ``sampler.set_epoch``. Here the epoch is read from the fit loop whenever an iterator is
created, and the saved position is the Trainer's count of processed batches (Lightning prefetches one ahead).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sized
from typing import ClassVar

import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, Dataset, IterableDataset, Sampler

from sts_lightning.embeddings.compat import IndexSamplerHook, index_sampler, set_sampler_epoch
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.model_card import DataFacts
from sts_lightning.embeddings.methods.shared.batch_tokens import BatchTokenizer, TokenizingCollate


def per_device_batch_size(batch_size: int, world_size: int) -> int:
    """The configured batch size is global (results don't change with the GPU count); split it evenly."""
    if batch_size < 1 or world_size < 1 or batch_size % world_size:
        raise ConfigError(f"batch_size={batch_size} (global) must be a positive multiple of the "
                          f"world size {world_size} (devices x nodes)")
    return batch_size // world_size


def trainer_epoch(trainer) -> int | None:
    """The epoch the next training iterator belongs to, right after a resume too (``None`` where there is none)."""
    if trainer is None:
        return None
    loop = getattr(trainer, "fit_loop", None)
    return loop.epoch_progress.current.processed if loop is not None else getattr(trainer, "current_epoch", None)


def trainer_position(trainer) -> dict[str, int] | None:
    """``{"epoch", "batches_done"}``: where the next training batch comes from."""
    loop = getattr(trainer, "fit_loop", None)
    if loop is None:
        return None
    epoch = max(loop.epoch_progress.current.ready - 1, 0)
    done = int(loop.epoch_loop.batch_progress.current.processed)
    if done and done >= trainer.num_training_batches:
        epoch, done = epoch + 1, 0
    return {"epoch": epoch, "batches_done": done}


class ResumableDataModule(LightningDataModule):
    """Puts the training position into every checkpoint and hands it to the first loader after a resume, so a
    resumed run sees the batches of an uninterrupted one (each epoch's order is a function of ``(seed, epoch)``).

    The DataModule, not the loader, holds the position: its state is restored before Lightning builds the first
    iterator. ``resumable = False`` with ``resume_note`` where the order cannot be restored.
    """

    resumable: ClassVar[bool] = True
    resume_note: ClassVar[str] = ("per-epoch order from (seed, epoch); the checkpoint holds the position "
                                  "(epoch, batches done) and the first iterator after a resume skips the done batches")
    dataset: Dataset | None = None
    batch_size: int
    seed: int
    shuffle: bool
    num_workers: int
    _pending_position: dict[str, int] | None = None
    _batch_tokenizer: BatchTokenizer | None = None


    data_unit: ClassVar[str] = "rows"  # what one training item is, for the model card

    @property
    def world_size(self) -> int:
        return self.trainer.world_size if self.trainer is not None else 1

    def ready_dataset(self) -> Dataset:
        """``dataset``, after ``setup`` where it has not run yet."""
        if self.dataset is None:
            self.setup("fit")
        return self.dataset

    def data_facts(self) -> DataFacts:
        """The training data for the export's model card, as ``setup`` learnt it (nothing is read again)."""
        index = getattr(self.dataset, "index", None)  # datamodules.sentence_files.SentenceIndex
        sized = index if index is not None else self.dataset
        rows = len(sized) if isinstance(sized, Sized) else None
        skipped = dict(getattr(index, "skipped", None) or {})
        return DataFacts(tuple(str(f) for f in getattr(self, "files", None) or ()), rows, self.data_unit,
                         skipped=skipped)

    def state_dict(self) -> dict[str, int]:
        return trainer_position(self.trainer) or {}

    def load_state_dict(self, state_dict: dict[str, int]) -> None:
        if state_dict:
            self._pending_position = {"epoch": int(state_dict["epoch"]),
                                      "batches_done": int(state_dict["batches_done"])}

    def next_iterator_position(self) -> tuple[int | None, int]:
        """(epoch, batches to skip) of a new iterator: the restored position once, then the Trainer's epoch."""
        pending, self._pending_position = self._pending_position, None
        if pending is not None:
            return pending["epoch"], pending["batches_done"]
        return trainer_epoch(self.trainer), 0

    # ------------------------------------------------------------------ tokenization in the workers
    def tokenize_with(self, tokenizer: BatchTokenizer | None) -> None:
        """Tokenize every training batch with ``tokenizer`` in the loader's workers (``None``: ask the Trainer's module)."""
        self._batch_tokenizer = tokenizer

    def batch_tokenizer(self) -> BatchTokenizer | None:
        """The set one, else the Trainer's module's (``None``: batches stay text, e.g. cached-feature methods)."""
        if self._batch_tokenizer is not None:
            return self._batch_tokenizer
        module = getattr(self.trainer, "lightning_module", None) if self.trainer is not None else None
        make = getattr(module, "batch_tokenizer", None)
        return make() if callable(make) else None

    def training_collate(self, collate: Callable | None) -> Callable | None:
        """``collate`` followed by the batch tokenizer, so token ids are made in the workers, not in the step."""
        tokenizer = self.batch_tokenizer()
        return collate if tokenizer is None else TokenizingCollate(collate, tokenizer)

    def pin_memory(self) -> bool:
        """Page-locked batches where the Trainer trains on a GPU (a faster, asynchronous copy); never on the CPU."""
        strategy = getattr(self.trainer, "strategy", None) if self.trainer is not None else None
        device = getattr(strategy, "root_device", None)
        return device is not None and device.type == "cuda"

    def resumable_loader(self, collate_fn: Callable | None = None, drop_last: bool = False,
                         batch_sampler: Sampler[list[int]] | None = None) -> ResumableLoader:
        """The loader of map-style ``dataset``: ``EpochShuffleSampler`` or ``batch_sampler``, persistent workers."""
        self.ready_dataset()
        if self.num_workers > 0:
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        if batch_sampler is not None:
            return ResumableLoader(self.dataset, batch_sampler=batch_sampler, num_workers=self.num_workers,
                                   collate_fn=collate_fn, persistent_workers=self.num_workers > 0, datamodule=self)
        sampler = EpochShuffleSampler(len(self.dataset), self.seed) if self.shuffle else None
        return ResumableLoader(self.dataset, batch_size=per_device_batch_size(self.batch_size, self.world_size),
                               sampler=sampler, num_workers=self.num_workers, collate_fn=collate_fn,
                               drop_last=drop_last, persistent_workers=self.num_workers > 0, datamodule=self)


class EpochShuffleSampler(Sampler[int]):
    """A permutation of ``range(n)`` seeded by ``(seed, epoch)``, identical on every rank (Lightning shards it)."""

    def __init__(self, n: int, seed: int = 0):
        self.n, self.seed, self.epoch = int(n), int(seed), 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        return iter(torch.randperm(self.n, generator=generator).tolist())


class _SkipBatches:
    """A batch sampler without its first ``skip`` batches (indices only), read when an iterator is created."""

    def __init__(self, batch_sampler, skip: int = 0):
        self.batch_sampler, self.skip = batch_sampler, skip

    def __len__(self) -> int:
        return max(len(self.batch_sampler) - self.skip, 0)

    def __iter__(self) -> Iterator:
        return self._batches(iter(self.batch_sampler), self.skip)

    @staticmethod
    def _batches(it: Iterator, skip: int) -> Iterator:
        for _ in range(skip):
            if next(it, None) is None:
                return
        yield from it


class ResumableLoader(IndexSamplerHook, DataLoader):
    """A DataLoader that starts each iterator at the position its ``ResumableDataModule`` names; the ``_SkipBatches``
    lives as long as the loader, since persistent workers re-read only the first iterator's index sampler."""

    _skipper: _SkipBatches | None = None

    def __init__(self, *args, datamodule: ResumableDataModule | None = None, **kwargs):
        if datamodule is not None:  # token ids made by the workers; pinned batches on a GPU
            kwargs["collate_fn"] = datamodule.training_collate(kwargs.get("collate_fn"))
            kwargs.setdefault("pin_memory", datamodule.pin_memory())
        # Our own generator for the per-iterator base seed DataLoader draws (worker seeds): drawn from the
        # global RNG it would shift the dropout masks of a resumed run against an uninterrupted one.
        kwargs["generator"] = kwargs.get("generator") or torch.Generator()
        super().__init__(*args, **kwargs)
        self.datamodule = datamodule

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state_dict: dict) -> None:  # the empty pair tells Lightning it resumes mid-epoch
        """Nothing to do: ``ResumableDataModule.load_state_dict`` restored the position earlier."""

    def index_sampler(self, base):
        if isinstance(self.dataset, IterableDataset):  # it skips by itself (``set_epoch``)
            return base
        if self._skipper is None or self._skipper.batch_sampler is not base:
            self._skipper = _SkipBatches(base)
        return self._skipper

    def __iter__(self):
        epoch, skip = self.datamodule.next_iterator_position() if self.datamodule is not None else (None, 0)
        self.generator.manual_seed(int(getattr(self.datamodule, "seed", 0)) * 100_003 + (epoch or 0))
        if isinstance(self.dataset, IterableDataset):
            self.dataset.set_epoch(self.dataset.epoch if epoch is None else epoch, skip_batches=skip)
            return super().__iter__()
        if epoch is not None:
            set_sampler_epoch(self, epoch)  # the sampler (Lightning's function skips a batch sampler's own)
            if callable(getattr(self.batch_sampler, "set_epoch", None)):
                self.batch_sampler.set_epoch(epoch)
        index_sampler(self).skip = skip
        try:
            return super().__iter__()
        finally:
            index_sampler(self).skip = 0  # len(loader) is the full epoch again
