"""The rank x worker sentence stream (datamodules.sentence_stream).

Ranks and workers are simulated (pure ``shard_indices`` and explicit rank/world_size); the real DDP run is
``test_sentences_ddp.py``. One test does start 2 real DataLoader workers to exercise ``get_worker_info``.
"""

from __future__ import annotations

import numpy as np
import pytest
from torch.utils.data import DataLoader

from sts_lightning.datamodules.sentence_files import SentenceIndex
from sts_lightning.datamodules.sentence_stream import SentenceStream, collate_sentences, shard_indices
from sts_lightning.embeddings.errors import ConfigError


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_shard_indices_partition(world_size, num_workers):
    n, batch, workers = 103, 4, max(num_workers, 1)
    per_rank = {}
    seen: list[int] = []
    for rank in range(world_size):
        for worker in range(workers):
            idx = shard_indices(n, rank, world_size, worker, num_workers, batch, epoch=0, seed=7)
            assert len(idx) % batch == 0  # only full batches
            per_rank[rank] = per_rank.get(rank, 0) + len(idx) // batch
            seen += idx.tolist()
    assert len(seen) == len(set(seen)) and set(seen) <= set(range(n))
    assert n - len(seen) <= world_size * workers * batch - 1
    assert len(set(per_rank.values())) == 1  # every rank the same number of batches
    again = shard_indices(n, 0, world_size, 0, num_workers, batch, epoch=0, seed=7)
    assert np.array_equal(again, shard_indices(n, 0, world_size, 0, num_workers, batch, 0, 7))


def test_epoch_reshuffles_order_but_keeps_the_set():
    n = 48  # a multiple of 2 ranks x 2 workers x 4: nothing dropped, so the sets are comparable
    def epoch(e):
        return [shard_indices(n, r, 2, w, 2, 4, e, seed=3).tolist() for r in range(2) for w in range(2)]
    e0, e1 = epoch(0), epoch(1)
    assert e0 != e1
    assert sorted(sum(e0, [])) == sorted(sum(e1, [])) == list(range(n))


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_stream_ranks_and_workers(sentence_file, world_size, num_workers):
    index = SentenceIndex.build([sentence_file], None)
    batch, yielded, batches = 2, [], set()
    for rank in range(world_size):
        ds = SentenceStream(index, batch, rank, world_size, num_workers, seed=1)
        ds.set_epoch(2)
        mine = [s for w in range(max(num_workers, 1)) for s in ds.iter_shard(w)]
        assert len(mine) == len(ds) and len(mine) % batch == 0
        batches.add(len(mine) // batch)
        yielded += mine
    assert len(batches) == 1 and len(yielded) == len(set(yielded))
    assert all(s.strip() and "broken" not in s for s in yielded)
    assert 0 <= len(index) - len(yielded) == ds.dropped() <= world_size * max(num_workers, 1) * batch - 1


def test_real_dataloader_workers_no_duplicates(sentence_file):
    index = SentenceIndex.build([sentence_file], None)
    ds = SentenceStream(index, per_device_batch=3, num_workers=2, seed=0)
    loader = DataLoader(ds, batch_size=3, num_workers=2, collate_fn=collate_sentences)
    got = [s for b in loader for s in b["sentences"]]
    assert len(got) == len(set(got)) == len(ds) == len(loader) * 3 == 36
    with pytest.raises(ConfigError, match="num_workers=2"):
        next(iter(ds))  # read in the main process: the shards would not match


@pytest.mark.parametrize("num_workers", [0, 2, 3])
def test_stream_resume_skips_exactly_the_done_batches(sentence_file, num_workers):
    """After ``set_epoch(e, skip_batches=k)`` a real DataLoader (workers read round-robin) yields
    exactly batches k, k+1, ... of the uninterrupted epoch, in order."""
    index = SentenceIndex.build([sentence_file], None)
    ds = SentenceStream(index, per_device_batch=2, num_workers=num_workers, seed=3)
    loader = DataLoader(ds, batch_size=2, num_workers=num_workers, collate_fn=collate_sentences)
    ds.set_epoch(1)
    full = [b["sentences"] for b in loader]
    assert len(full) == len(loader) > 6
    for skip in (1, 2, 5, len(full) - 1, len(full)):
        ds.set_epoch(1, skip_batches=skip)
        assert [b["sentences"] for b in loader] == full[skip:], skip
