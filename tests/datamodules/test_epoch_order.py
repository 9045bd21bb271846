"""The keyed bijection that orders an epoch (datamodules.epoch_order) and the stream that evaluates it lazily."""

from __future__ import annotations

import numpy as np
import pytest

from sts_lightning.datamodules import sentence_stream
from sts_lightning.datamodules.epoch_order import EpochOrder
from sts_lightning.datamodules.sentence_files import SentenceIndex
from sts_lightning.datamodules.sentence_stream import SentenceStream


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 17, 48, 103, 1000, 4097])
def test_every_item_once_and_a_new_order_each_epoch(n):
    orders = [EpochOrder(n, seed=3, epoch=e)[np.arange(n)] for e in range(3)]
    assert all(sorted(o.tolist()) == list(range(n)) for o in orders)
    if n >= 17:
        assert not np.array_equal(orders[0], orders[1]) and not np.array_equal(orders[0], np.arange(n))
    assert np.array_equal(EpochOrder(n, 3, 0, shuffle=False)[np.arange(n)], np.arange(n))


def test_any_slice_of_positions_is_the_same_order_and_keyed_by_seed_and_epoch():
    n = 100_003
    whole = EpochOrder(n, 7, 2)[np.arange(n)]
    positions = np.arange(5, n, 13)
    assert np.array_equal(EpochOrder(n, 7, 2)[positions], whole[positions])  # a shard, computed on its own
    assert not np.array_equal(EpochOrder(n, 8, 2)[positions], whole[positions])
    with pytest.raises(IndexError):
        EpochOrder(n, 7, 2)[np.array([n])]


def test_positions_are_spread_uniformly():
    """Where item 0 lands over many epochs: no position is favoured (chi-square per cell ~ 1)."""
    n, epochs = 10, 4000
    counts = np.zeros((n, n))
    for e in range(epochs):
        counts[np.arange(n), EpochOrder(n, 0, e)[np.arange(n)]] += 1
    expected = epochs / n
    assert ((counts - expected) ** 2 / expected).mean() < 1.5


@pytest.mark.parametrize("skip", [0, 1, 3, 7])
def test_the_stream_evaluates_its_shard_in_blocks_and_resumes_exactly(sentence_file, monkeypatch, skip):
    index = SentenceIndex.build([sentence_file], None)
    ds = SentenceStream(index, per_device_batch=2, rank=1, world_size=2, num_workers=2, seed=4)
    ds.set_epoch(3)
    whole = [list(ds.iter_shard(w)) for w in range(2)]
    monkeypatch.setattr(sentence_stream, "BLOCK", 3)  # several blocks, one ending inside a batch
    assert [list(ds.iter_shard(w)) for w in range(2)] == whole
    ds.set_epoch(3, skip_batches=skip)
    loader_order = [s for j in range(skip, len(ds) // 2) for s in whole[j % 2][(j // 2) * 2:(j // 2) * 2 + 2]]
    resumed = [list(ds.iter_shard(w)) for w in range(2)]
    batches = [resumed[w][i:i + 2] for i in range(0, max(map(len, resumed)), 2) for w in range(2)]
    assert [s for b in batches for s in b] == loader_order
