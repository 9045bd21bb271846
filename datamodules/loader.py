"""Training DataLoaders that survive a mid-epoch kill: per-epoch shuffling read from the Trainer, and a
position Lightning saves in ``last.ckpt`` and hands back on resume.

Why: Lightning restarts a plain DataLoader from batch 0 after a mid-epoch resume (the rest of the epoch
then replays its first batches), and it creates the first iterator of a (resumed) epoch *before* it calls
``sampler.set_epoch``, so a sampler that waits for ``set_epoch`` draws the wrong permutation. Here the
epoch is read from the fit loop whenever an iterator is created, and ``ResumableLoader`` implements the
``state_dict`` / ``load_state_dict`` pair that Lightning's fit loop stores with the checkpoint
(``loops.fit_loop.combined_loader``). The saved position is the Trainer's own count of processed batches,
not the loader's count of yielded ones (Lightning prefetches one batch ahead).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sized
from typing import ClassVar

import torch
from lightning.fabric.utilities.data import _set_sampler_epoch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, Dataset, IterableDataset, Sampler

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
    """The epoch the next training iterator belongs to: epochs processed so far, right after a resume too.

    (``current_epoch`` lags by one when resuming from an end-of-epoch checkpoint; it is only the fallback
    for a stand-in without a fit loop, and ``None`` where that has no epoch either.)
    """
    if trainer is None:
        return None
    loop = getattr(trainer, "fit_loop", None)
    return loop.epoch_progress.current.processed if loop is not None else getattr(trainer, "current_epoch", None)


def trainer_position(trainer) -> dict[str, int] | None:
    """``{"epoch", "batches_done"}``: where the next training batch comes from.

    During epoch ``e`` the fit loop's ``ready`` count is ``e + 1`` (``processed`` only moves at its end);
    once all of the epoch's batches are done the position is the start of epoch ``e + 1``.
    """
    loop = getattr(trainer, "fit_loop", None)
    if loop is None:
        return None
    epoch = max(loop.epoch_progress.current.ready - 1, 0)
    done = int(loop.epoch_loop.batch_progress.current.processed)
    if done and done >= trainer.num_training_batches:
        epoch, done = epoch + 1, 0
    return {"epoch": epoch, "batches_done": done}


class ResumableDataModule(LightningDataModule):
    """Puts the training position into every checkpoint and hands it to the first loader after a resume.

    A killed run resumed from ``last.ckpt`` then trains on exactly the batches, in exactly the order, an
    uninterrupted run would have seen: each epoch's order is a function of ``(seed, epoch)`` alone, and the
    first iterator after a resume skips the batches the saved position says were done.

    What a subclass provides (``tests/datamodules/test_loader.py`` checks every ``configs/data`` class):

    * ``dataset``: built by ``setup`` (``None`` before). Map-style, or an ``IterableDataset`` with an
      ``epoch`` attribute and ``set_epoch(epoch, skip_batches=...)`` that shards, orders and skips itself
      (``datamodules.sentence_stream.SentenceStream``).
    * ``batch_size`` (GLOBAL: every device gets ``batch_size // world_size``), ``seed``, ``shuffle``,
      ``num_workers``: ``seed`` also seeds the loader's worker base seed per epoch.
    * ``train_dataloader`` returning a ``ResumableLoader(..., datamodule=self)``. For map-style data
      ``resumable_loader(collate_fn)`` is the whole method: an ``EpochShuffleSampler`` (or file order),
      the per-device batch, workers.

    ``resumable`` / ``resume_note`` say whether and how a class resumes mid-epoch; a DataModule that truly
    cannot (its order depends on something no checkpoint holds) sets ``resumable = False`` and says why.

    Why the DataModule and not the loader's own ``state_dict`` (which Lightning also supports): when
    ``configure_optimizers`` reads ``trainer.estimated_stepping_batches`` (our warm-up schedules do),
    Lightning builds the train loader and its first iterator *before* it restores the loops, and then
    never hands the loader its saved state. DataModule state is restored before that, so the first
    iterator already knows the epoch and the number of batches to skip.
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

    def data_facts(self) -> DataFacts:
        """The training data for the export's model card (``embeddings.io.model_card``), as ``setup`` learnt it.

        The configured ``files``; the rows used: those of the sentence index where the dataset reads one (its
        count and skip reasons cover all ranks), else the dataset's length; nothing is read again for the card.
        A datamodule that reads its sources one by one (NLI) overrides it with per-source counts.
        """
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
        """(epoch, batches to skip) for a new training iterator: the restored position once, then the
        Trainer's epoch from the start (``None`` outside a Trainer)."""
        pending, self._pending_position = self._pending_position, None
        if pending is not None:
            return pending["epoch"], pending["batches_done"]
        return trainer_epoch(self.trainer), 0

    # ------------------------------------------------------------------ tokenization in the workers
    def tokenize_with(self, tokenizer: BatchTokenizer | None) -> None:
        """Tokenize every training batch with ``tokenizer`` in the loader's workers (``None``: the module's own).

        Without it, the Trainer's LightningModule is asked (``EncoderModule.batch_tokenizer``) when a loader is
        built, so ``Trainer.fit(module, datamodule)`` needs no wiring; this is for a loader used outside a Trainer.
        """
        self._batch_tokenizer = tokenizer

    def batch_tokenizer(self) -> BatchTokenizer | None:
        """The set one, else the Trainer's module's (``None``: batches stay text, e.g. cached-feature methods)."""
        if self._batch_tokenizer is not None:
            return self._batch_tokenizer
        module = getattr(self.trainer, "lightning_module", None) if self.trainer is not None else None
        make = getattr(module, "batch_tokenizer", None)
        return make() if callable(make) else None

    def training_collate(self, collate: Callable | None) -> Callable | None:
        """``collate`` followed by the batch tokenizer, so token ids are made in the workers, not in the step.

        Why in the collate function: it runs in the worker processes (``num_workers > 0``) while the previous
        step runs, and nothing about the batches' order, sharding or resume position changes (those are the
        sampler's and the dataset's); with ``num_workers=0`` it runs in the loader, still outside the step.
        """
        tokenizer = self.batch_tokenizer()
        return collate if tokenizer is None else TokenizingCollate(collate, tokenizer)

    def pin_memory(self) -> bool:
        """Page-locked batches where the Trainer trains on a GPU (a faster, asynchronous copy); never on the CPU."""
        strategy = getattr(self.trainer, "strategy", None) if self.trainer is not None else None
        device = getattr(strategy, "root_device", None)
        return device is not None and device.type == "cuda"

    def resumable_loader(self, collate_fn: Callable | None = None, drop_last: bool = False,
                         batch_sampler: Sampler[list[int]] | None = None) -> ResumableLoader:
        """The training loader of map-style ``self.dataset``: shuffled by ``EpochShuffleSampler(seed)`` (or
        in dataset order), ``batch_size // world_size`` a device, workers kept alive across epochs.

        ``batch_sampler``: one that orders, batches and shards by itself (``datamodules.mixture``) instead.
        """
        if self.dataset is None:
            self.setup("fit")
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
    """A permutation of ``range(n)`` seeded by ``(seed, epoch)``, identical on every rank.

    ``ResumableLoader`` sets the epoch before each iterator starts drawing (Lightning's own ``set_epoch``
    comes after the first batch of an epoch was prefetched). Under DDP Lightning wraps this sampler in
    its ``DistributedSamplerWrapper``, which forwards ``set_epoch`` and shards the permutation by rank.
    """

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
    """A batch sampler without its first ``skip`` batches (indices only: no data is loaded for them).

    ``skip`` is read when an iterator is created (``iter`` is eager, the batches lazy), so the loader can
    set it for one iterator and clear it again before the next.
    """

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


class ResumableLoader(DataLoader):
    """A DataLoader that starts each iterator at the position its ``ResumableDataModule`` names.

    Args (besides DataLoader's):
        datamodule: gives ``(epoch, batches to skip)`` for every new iterator, and the tokenizer its collate
            function ends with (``ResumableDataModule.training_collate``) and whether to pin memory.

    The epoch goes to the sampler (map-style; skipped batches are dropped as index lists, no data is
    loaded for them) or to the dataset's ``set_epoch(epoch, skip_batches)`` (iterable, e.g.
    ``SentenceStream``). ``state_dict`` / ``load_state_dict`` are present (the position itself travels
    in the DataModule's state) so that Lightning knows this loader resumes mid-epoch.

    The index sampler is one ``_SkipBatches`` for the loader's life: with persistent workers DataLoader
    keeps its first iterator and re-reads only *that* iterator's index sampler each epoch, so a wrapper
    made for the first (resumed) iterator alone would skip the same batches again every later epoch.
    """

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

    def load_state_dict(self, state_dict: dict) -> None:
        """Nothing to do: ``ResumableDataModule.load_state_dict`` restored the position earlier."""

    @property
    def _index_sampler(self):
        base = super()._index_sampler
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
            _set_sampler_epoch(self, epoch)  # the sampler (Lightning's function skips a batch sampler's own)
            if callable(getattr(self.batch_sampler, "set_epoch", None)):
                self.batch_sampler.set_epoch(epoch)
        self._index_sampler.skip = skip
        try:
            return super().__iter__()
        finally:
            self._index_sampler.skip = 0  # len(loader) is the full epoch again
