"""One rank's share of a sentence index as an IterableDataset, sharded by rank x dataloader worker.

All ranks use the same order each epoch (``datamodules.epoch_order``); position ``i`` goes to shard
``i % (world_size * workers)``, and the order is cut so every rank yields the SAME number of full batches (unequal
counts hang DDP). ``set_epoch(epoch, skip_batches=k)`` leaves out this rank's first ``k`` batches; worker ``w`` then
takes worker ``(w + k) % W``'s shard, as the DataLoader reads workers round-robin.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from torch.utils.data import IterableDataset, get_worker_info

from sts_lightning.datamodules.epoch_order import EpochOrder
from sts_lightning.datamodules.sentence_files import SentenceIndex
from sts_lightning.embeddings.errors import ConfigError

BLOCK = 4096  # positions of the order evaluated at a time (a shard's order is never held whole)


def items_per_shard(n_items: int, world_size: int, num_workers: int, per_device_batch: int) -> int:
    """Sentences each (rank, worker) yields per epoch: a whole number of full batches, equal everywhere."""
    shards = world_size * max(num_workers, 1)
    return n_items // (shards * per_device_batch) * per_device_batch


def shard_positions(n_items: int, rank: int, world_size: int, worker: int, num_workers: int,
                    per_device_batch: int) -> range:
    """Positions of the epoch's order that one (rank, worker) yields, in order (``num_workers=0``: one worker)."""
    workers = max(num_workers, 1)
    if not (0 <= rank < world_size and 0 <= worker < workers and per_device_batch >= 1):
        raise ConfigError(f"invalid shard rank={rank}/{world_size} worker={worker}/{workers} "
                          f"per_device_batch={per_device_batch}")
    shards = world_size * workers
    used = items_per_shard(n_items, world_size, num_workers, per_device_batch) * shards
    return range(rank * workers + worker, used, shards)


def shard_indices(n_items: int, rank: int, world_size: int, worker: int, num_workers: int,
                  per_device_batch: int, epoch: int, seed: int, shuffle: bool = True) -> np.ndarray:
    """Item indices that one (rank, worker) yields in one epoch, as one array (what ``SentenceStream`` streams)."""
    positions = shard_positions(n_items, rank, world_size, worker, num_workers, per_device_batch)
    return EpochOrder(n_items, seed, epoch, shuffle)[np.arange(positions.start, positions.stop, positions.step)]


class SentenceStream(IterableDataset):
    """One rank's share of the sentences; each DataLoader worker takes its own shard (``shard_indices``)."""

    def __init__(self, index: SentenceIndex, per_device_batch: int, rank: int = 0, world_size: int = 1,
                 num_workers: int = 0, seed: int = 0, shuffle: bool = True):
        self.index, self.batch, self.rank, self.world_size = index, per_device_batch, rank, world_size
        self.num_workers, self.seed, self.shuffle, self.epoch = num_workers, seed, shuffle, 0
        self.skip_batches = 0
        shard_positions(0, rank, world_size, 0, num_workers, per_device_batch)  # validates

    def set_epoch(self, epoch: int, skip_batches: int = 0) -> None:
        """Pick the epoch's order (and batches already done); must happen before the workers start."""
        if skip_batches < 0:
            raise ValueError(f"skip_batches must be >= 0, got {skip_batches}")
        self.epoch, self.skip_batches = int(epoch), int(skip_batches)

    def __len__(self) -> int:
        """Sentences this rank yields per epoch (all its workers): exact, so ``len(loader)`` is too."""
        return items_per_shard(len(self.index), self.world_size, self.num_workers, self.batch) * max(
            self.num_workers, 1)

    def dropped(self) -> int:
        """Sentences left out per epoch so that every rank has the same number of full batches."""
        return len(self.index) - len(self) * self.world_size

    def iter_shard(self, worker: int) -> Iterator[str]:
        """The sentences one worker of this rank yields this epoch (after ``skip_batches``)."""
        workers = max(self.num_workers, 1)
        role = (worker + self.skip_batches) % workers  # whose shard this worker continues
        skipped = len(range(role, self.skip_batches, workers))  # batches that shard already gave
        positions = shard_positions(len(self.index), self.rank, self.world_size, role, self.num_workers,
                                    self.batch)[skipped * self.batch:]
        order = EpochOrder(len(self.index), self.seed, self.epoch, self.shuffle)
        for first in range(0, len(positions), BLOCK):
            block = positions[first:first + BLOCK]
            for i in order[np.arange(block.start, block.stop, block.step)].tolist():
                yield self.index.sentence(i)

    def __iter__(self) -> Iterator[str]:
        info = get_worker_info()
        workers = info.num_workers if info is not None else 0
        if workers != self.num_workers:
            raise ConfigError(f"SentenceStream was built for num_workers={self.num_workers} but is read "
                              f"with {workers}: shards would overlap or be lost")
        return self.iter_shard(info.id if info is not None else 0)


def collate_sentences(batch: list[str]) -> dict[str, list[str]]:
    """Raw strings: the LightningModule tokenizes (the encoder owns its tokenizer)."""
    return {"sentences": list(batch)}
