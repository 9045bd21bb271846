"""Batches drawn one source at a time (``data.mixture``) and without a text twice in a batch (``data.no_duplicates``).

sentence-transformers' rule (``MultiDatasetBatchSamplers``, ``NO_DUPLICATES``), re-implemented to resume exactly and
split global batches over DDP ranks: each epoch is a pure function of ``(seed, epoch)``; a row joins a batch only
when none of its texts is in it (one put off waits for the next); every source gives a fixed number of batches an
epoch (``mixture_rules.batch_slots``), leftovers unserved and a short source read again, counted in ``epoch_stats``;
every rank computes the same global batches and takes its slice (a short last batch padded by repeating rows).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice

import torch
from torch.utils.data import BatchSampler, DistributedSampler

from sts_lightning.datamodules.loader import per_device_batch_size
from sts_lightning.datamodules.mixture_rules import batch_slots, batches_of

EXTRA_PASSES = 2  # passes over a source beyond those its batches need, before it counts as spent

Texts = Callable[[int], frozenset]


def row_texts(dataset) -> Texts:
    """Row ``i``'s texts: its ``str`` fields (a label or score is no text, as in sentence-transformers)."""
    return lambda i: frozenset(v for v in dataset[i] if isinstance(v, str))


def plain_batches(order: Sequence[int], batch_size: int, drop_last: bool) -> Iterator[list[int]]:
    """``order`` cut into batches, a last short one unless ``drop_last``."""
    for start in range(0, len(order), batch_size):
        batch = list(order[start:start + batch_size])
        if len(batch) == batch_size or not drop_last:
            yield batch


def distinct_batches(order: Iterable[int], texts: Texts, batch_size: int, drop_last: bool,
                     stats: Counter) -> Iterator[list[int]]:
    """Batches in which no text occurs twice: a row that would repeat one waits, tried first for the next batch."""
    unread, waiting, was_deferred = iter(order), [], set()
    while True:
        batch, seen, still_waiting = [], set(), []
        for k, row in enumerate(waiting):
            if len(batch) == batch_size:
                still_waiting.extend(waiting[k:])
                break
            if not _joins(row, texts(row), batch, seen):
                still_waiting.append(row)
        waiting = still_waiting
        while len(batch) < batch_size and (row := next(unread, None)) is not None:
            if not _joins(row, texts(row), batch, seen):
                waiting.append(row)
                stats["deferred"] += row not in was_deferred
                was_deferred.add(row)
        if not batch:
            return
        if len(batch) == batch_size or not drop_last:
            yield batch


def _joins(row: int, row_set: frozenset, batch: list[int], seen: set) -> bool:
    """Put ``row`` into ``batch`` if none of its texts is ``seen`` there yet."""
    if not seen.isdisjoint(row_set):
        return False
    batch.append(row)
    seen.update(row_set)
    return True


class MixtureBatchSampler(BatchSampler):
    """Global batches of one source each (or of the pooled data, ``rule=None``), this rank's slice of each; only
    the rank and world size of ``sampler`` are used; ``texts`` (row -> texts) enables the no-duplicates rule."""

    def __init__(self, sampler=None, *, sizes: Sequence[int], batch_size: int, rule: str | None = None,
                 weights: Sequence[float] | None = None, texts: Texts | None = None, seed: int = 0,
                 shuffle: bool = True, drop_last: bool = False, world_size: int = 1, rank: int = 0):
        if isinstance(sampler, DistributedSampler):
            world_size, rank = sampler.num_replicas, sampler.rank
        super().__init__(sampler if sampler is not None else range(sum(sizes)),
                         per_device_batch_size(batch_size, world_size), drop_last)
        self.sizes, self.global_batch_size, self.rule, self.texts = [int(n) for n in sizes], batch_size, rule, texts
        self.seed, self.shuffle, self.world_size, self.rank, self.epoch = int(seed), shuffle, world_size, rank, 0
        self.slots = batch_slots(self.sizes, batch_size, drop_last, rule, weights)
        self.offsets = [sum(self.sizes[:d]) for d in range(len(self.sizes))]

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return sum(self.slots)

    def __iter__(self) -> Iterator[list[int]]:
        return (self._rank_slice(batch) for batch in self.global_batches(self.epoch))

    def global_batches(self, epoch: int, stats: Counter | None = None) -> Iterator[list[int]]:
        """Epoch ``epoch``'s global batches (dataset indices), the same on every rank."""
        stats = Counter() if stats is None else stats
        seed = self.seed * 100_003 + epoch
        streams = [islice(self._source_batches(d, seed, stats), slots) for d, slots in enumerate(self.slots)]
        if self.rule == "round_robin":  # a round is served whole, or the epoch ends (sentence-transformers' zip)
            for _ in range(self.slots[0]):
                batches = [next(stream, None) for stream in streams]
                if any(b is None for b in batches):
                    return
                yield from batches
            return
        schedule = [d for d, slots in enumerate(self.slots) for _ in range(slots)]
        if self.rule == "proportional":
            order = torch.randperm(len(schedule), generator=torch.Generator().manual_seed(seed)).tolist()
            schedule = [schedule[i] for i in order]
        for d in schedule:
            batch = next(streams[d], None)
            if batch is not None:  # a source spent early (drop_last, too few distinct texts): its turns lapse
                yield batch

    def epoch_stats(self, epoch: int = 0) -> Counter:
        """Per epoch: ``batches``, ``deferred`` rows (no-duplicates), ``unserved`` rows, ``short`` of the length."""
        stats, served, batches = Counter(), set(), 0
        for batch in self.global_batches(epoch, stats):
            served.update(batch)
            batches += 1
        stats.update(batches=batches, unserved=sum(self.sizes) - len(served), short=len(self) - batches)
        return stats

    def _source_batches(self, d: int, seed: int, stats: Counter) -> Iterator[list[int]]:
        """Source ``d``'s batches: pass after pass over its rows, each pass reshuffled by the source's generator."""
        n, offset = self.sizes[d], self.offsets[d]
        generator = torch.Generator().manual_seed(seed)
        need = -(-self.slots[d] // max(batches_of(n, self.global_batch_size, True), 1))
        for _ in range(need + EXTRA_PASSES):
            order = torch.randperm(n, generator=generator).tolist() if self.shuffle else range(n)
            order = [offset + i for i in order]
            if self.texts is None:
                batches = plain_batches(order, self.global_batch_size, self.drop_last)
            else:
                batches = distinct_batches(order, self.texts, self.global_batch_size, self.drop_last, stats)
            served = 0
            for batch in batches:
                served += 1
                yield batch
            if not served:
                return

    def _rank_slice(self, batch: list[int]) -> list[int]:
        """This rank's contiguous share; a short batch padded with its own rows to a multiple of the world size."""
        if self.world_size == 1:
            return batch
        share = -(-len(batch) // self.world_size)
        padded = (batch * -(-share * self.world_size // len(batch)))[:share * self.world_size]
        return padded[self.rank * share:(self.rank + 1) * share]


def mixture_sampler(dm) -> MixtureBatchSampler:
    """The batch sampler of a DataModule with ``mix`` (``MixtureOptions``) and ``source_rows`` set by its ``setup``."""
    return MixtureBatchSampler(sizes=list(dm.source_rows.values()), batch_size=dm.batch_size, rule=dm.mix.rule,
                               weights=dm.mix.weights, texts=row_texts(dm.dataset) if dm.mix.no_duplicates else None,
                               seed=dm.seed, shuffle=dm.shuffle, drop_last=dm.drop_last, world_size=dm.world_size,
                               rank=getattr(dm.trainer, "global_rank", 0) if dm.trainer is not None else 0)


def describe_mixture(dm) -> str:
    """The setup line: the rule, each source's rows and share of batches, epoch 0's no-duplicates counts."""
    sampler = mixture_sampler(dm)
    total = max(sum(sampler.slots), 1)
    parts = [f"{name} {rows:,} rows {100 * slots / total:.1f}% of batches"
             for (name, rows), slots in zip(dm.source_rows.items(), sampler.slots, strict=True)]
    stats = sampler.epoch_stats(0)
    line = (f"training batches: data.mixture={dm.mix.rule or 'null (pooled)'}, data.no_duplicates="
            f"{str(dm.mix.no_duplicates).lower()}: {'; '.join(parts)}; epoch 0: {stats['batches']} batches, "
            f"{stats['deferred']} rows deferred, {stats['unserved']} rows not served")
    return line + (f", {stats['short']} batches short (too few distinct texts)" if stats["short"] else "")
