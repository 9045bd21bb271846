"""The sentence index over text files (datamodules.sentence_files): empty and undecodable lines skipped and
counted, the cached index, the word-count filter.
"""

from __future__ import annotations

import logging

import pytest

from sts_lightning.datamodules.sentence_files import SentenceIndex
from sts_lightning.embeddings.errors import DataError


def test_index_skips_and_counts_empty_and_undecodable(sentence_file, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        index = SentenceIndex.build([sentence_file], tmp_path / "cache")
    assert len(index) == 37 and index.skipped == {"empty": 3, "not UTF-8": 1}
    assert f"{sentence_file}:4" in caplog.text and f"{sentence_file}:41" in caplog.text
    assert all(index.sentence(i).startswith("sentence number") for i in range(len(index)))
    assert len(list((tmp_path / "cache" / "sentence-index").glob("*.npy"))) == 1
    cached = SentenceIndex.build([sentence_file], tmp_path / "cache", min_words=1, max_sentences=5)
    assert len(cached) == 5 and cached.sentence(4) == index.sentence(4)
    with pytest.raises(DataError, match="no usable sentences"):
        SentenceIndex.build([sentence_file], None, max_words=3)  # every line has 4 words


def test_the_cached_index_is_read_from_its_file_and_not_pickled_into_workers(sentence_file, tmp_path):
    """Every rank and worker reads the same ``.npy`` (one copy in the page cache) instead of holding its own."""
    import pickle

    import numpy as np

    from sts_lightning.datamodules.sentence_files import load_spans

    spans, stats = load_spans(sentence_file, tmp_path / "cache")
    assert isinstance(spans, np.memmap) and spans.shape == (37, 2) and stats["skipped"]["empty"] == 3
    index = SentenceIndex.build([sentence_file] * 3, tmp_path / "cache", max_sentences=100)
    assert len(index) == 100 and index.sentence(37) == index.sentence(0) and index.sentence(99) == index.sentence(25)
    copy = pickle.loads(pickle.dumps(index))
    assert len(pickle.dumps(index)) < 2000 and copy.sentence(80) == index.sentence(80)  # a path, not the spans
    head, tail = index.split_tail(10)
    assert len(head) == 90 and tail == [index.sentence(i) for i in range(90, 100)]
    with pytest.raises(IndexError):
        head.sentence(90)


@pytest.mark.slow  # 1,000 cache writes: 7 s on 2 idle cores, 45 s on busy ones
def test_a_thousand_shards_are_read_with_few_open_files(tmp_path):
    """A corpus of many files: each is scanned and cached once; reading them all keeps at most ``MAX_OPEN``
    descriptors (text and index files) open, least recently used closed, so 1,000 shards need no raised
    ``ulimit``."""
    import os

    import numpy as np

    shards = []
    for s in range(1000):
        path = tmp_path / "corpus" / f"shard{s:04d}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"shard {s} line one\n\nshard {s} line two\n")
        shards.append(path)
    index = SentenceIndex.build(shards, tmp_path / "cache")
    assert len(index) == 2000 and index.skipped == {"empty": 1000}
    fds_before = len(os.listdir("/proc/self/fd"))
    order = np.random.default_rng(0).permutation(2000)
    assert sorted(index.sentence(int(i)) for i in order) == sorted(
        f"shard {s} line {w}" for s in range(1000) for w in ("one", "two"))
    assert len(index._fds) == index.MAX_OPEN and len(os.listdir("/proc/self/fd")) - fds_before <= index.MAX_OPEN


@pytest.mark.parametrize("quota", [64, 40_000])
def test_a_full_disk_during_the_index_scan_names_the_whole_index_size(tmp_path, monkeypatch, quota):
    """The index streams to disk, so its size is extrapolated when the disk fills: at the header (from the first
    MiB's lines) or half-way (from the lines found so far); both within 5% of 16 bytes a line."""
    import functools

    from sts_lightning.datamodules import span_cache
    from sts_lightning.embeddings.errors import DiskFullError
    from tests.disk_quota import disk_full

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i} of a corpus\n" for i in range(20_000)))
    # several chunks, so a 40 kB quota fails half-way through the 320 kB index
    monkeypatch.setattr(span_cache, "scan_into", functools.partial(span_cache.scan_into, chunk_bytes=1 << 16))
    with disk_full("sentence-index", nbytes=quota), pytest.raises(DiskFullError) as err:
        span_cache.load_spans(corpus, tmp_path / "cache")
    assert abs(err.value.needed / (128 + 16 * 20_000) - 1) < 0.05, err.value
    assert list((tmp_path / "cache" / "sentence-index").iterdir()) == []
