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
