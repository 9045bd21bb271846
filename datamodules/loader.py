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

from collections.abc import Iterator

import torch
from lightning.fabric.utilities.data import _set_sampler_epoch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, IterableDataset, Sampler

from embeddings.errors import ConfigError


def per_device_batch_size(batch_size: int, world_size: int) -> int:
    """The configured batch size is global (results don't change with the GPU count); split it evenly."""
    if batch_size < 1 or world_size < 1 or batch_size % world_size:
        raise ConfigError(f"batch_size={batch_size} (global) must be a positive multiple of the "
                          f"world size {world_size} (devices x nodes)")
    return batch_size // world_size


def trainer_epoch(trainer) -> int | None:
    """The epoch the next training iterator belongs to: epochs processed so far, right after a resume too.

    (``current_epoch`` lags by one when resuming from an end-of-epoch checkpoint.)
    """
    if trainer is None:
        return None
    loop = getattr(trainer, "fit_loop", None)
    return loop.epoch_progress.current.processed if loop is not None else trainer.current_epoch


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

    Why the DataModule and not the loader's own ``state_dict`` (which Lightning also supports): when
    ``configure_optimizers`` reads ``trainer.estimated_stepping_batches`` (our warm-up schedules do),
    Lightning builds the train loader and its first iterator *before* it restores the loops, and then
    never hands the loader its saved state. DataModule state is restored before that, so the first
    iterator already knows the epoch and the number of batches to skip.
    """

    _pending_position: dict[str, int] | None = None

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
    """A batch sampler without its first ``skip`` batches (indices only: no data is loaded for them)."""

    def __init__(self, batch_sampler, skip: int):
        self.batch_sampler, self.skip = batch_sampler, skip

    def __len__(self) -> int:
        return max(len(self.batch_sampler) - self.skip, 0)

    def __iter__(self):
        it = iter(self.batch_sampler)
        for _ in range(self.skip):
            if next(it, None) is None:
                return
        yield from it


class ResumableLoader(DataLoader):
    """A DataLoader that starts each iterator at the position its ``ResumableDataModule`` names.

    Args (besides DataLoader's):
        datamodule: gives ``(epoch, batches to skip)`` for every new iterator.

    The epoch goes to the sampler (map-style; skipped batches are dropped as index lists, no data is
    loaded for them) or to the dataset's ``set_epoch(epoch, skip_batches)`` (iterable, e.g.
    ``SentenceStream``). ``state_dict`` / ``load_state_dict`` are present (the position itself travels
    in the DataModule's state) so that Lightning knows this loader resumes mid-epoch.
    """

    def __init__(self, *args, datamodule: ResumableDataModule | None = None, **kwargs):
        # Our own generator for the per-iterator base seed DataLoader draws (worker seeds): drawn from the
        # global RNG it would shift the dropout masks of a resumed run against an uninterrupted one.
        kwargs["generator"] = kwargs.get("generator") or torch.Generator()
        super().__init__(*args, **kwargs)
        self.datamodule = datamodule
        self._skip_now = 0

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        """Nothing to do: ``ResumableDataModule.load_state_dict`` restored the position earlier."""

    @property
    def _index_sampler(self):
        base = super()._index_sampler
        return _SkipBatches(base, self._skip_now) if self._skip_now else base

    def __iter__(self):
        epoch, skip = self.datamodule.next_iterator_position() if self.datamodule is not None else (None, 0)
        self.generator.manual_seed(int(getattr(self.datamodule, "seed", 0)) * 100_003 + (epoch or 0))
        if isinstance(self.dataset, IterableDataset):
            self.dataset.set_epoch(self.dataset.epoch if epoch is None else epoch, skip_batches=skip)
            return super().__iter__()
        if epoch is not None:
            _set_sampler_epoch(self, epoch)
        self._skip_now = skip
        try:
            return super().__iter__()
        finally:
            self._skip_now = 0
