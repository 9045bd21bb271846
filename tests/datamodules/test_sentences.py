"""SentenceDataModule (datamodules.sentences): files, hub sentences streamed once, STS task sentences, errors.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sts_lightning.datamodules.nli_readers import load_source
from sts_lightning.datamodules.sentence_files import SentenceIndex
from sts_lightning.datamodules.sentence_stream import shard_indices
from sts_lightning.datamodules.sentences import SentenceDataModule
from sts_lightning.embeddings.errors import ConfigError, DataError


def test_sentence_datamodule(sentence_file, tmp_path):
    dm = SentenceDataModule(str(tmp_path / "data"), ["wiki/s.txt"], batch_size=4, seed=5,
                            max_sentences=30, min_words=4, max_words=4, cache_dir=str(tmp_path / "c"))
    dm.prepare_data()
    dm.setup("fit")
    loader = dm.train_dataloader()
    first = [s for b in loader for s in b["sentences"]]
    dm.set_epoch(1)
    second = [s for b in loader for s in b["sentences"]]
    assert len(first) == len(second) == 28 and first != second
    rank1 = SentenceDataModule(str(tmp_path / "data"), "wiki/s.txt", batch_size=4, seed=5, max_sentences=30,
                               cache_dir=str(tmp_path / "c"))
    rank1.trainer = SimpleNamespace(global_rank=1, world_size=2, current_epoch=1)  # epoch from the trainer
    rank1.setup("fit")
    mine = [s for b in rank1.train_dataloader() for s in b["sentences"]]
    expected = shard_indices(30, rank=1, world_size=2, worker=0, num_workers=0, per_device_batch=2, epoch=1, seed=5)
    assert mine == [rank1.dataset.index.sentence(i) for i in expected] and len(mine) == 14
    rank1.trainer.world_size = 3
    with pytest.raises(ConfigError, match="batch_size=4"):
        rank1.setup("fit")


def test_hub_sentences_streamed_once_into_a_text_file(monkeypatch, tmp_path):
    import datasets

    rows = [{"text": " = Title = \n"}, {"text": ""}, {"text": "first line\nwith a break"}, {"text": "second"}]
    calls = []
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: calls.append((a, k)) or iter(rows))
    dm = SentenceDataModule(None, ["hub:wikitext:wikitext-2-raw-v1:train"], batch_size=1,
                            cache_dir=str(tmp_path))
    dm.prepare_data()
    dm.setup("fit")
    assert sorted(s for b in dm.train_dataloader() for s in b["sentences"]) == [
        "= Title =", "first line with a break", "second"]
    assert calls == [(("wikitext", "wikitext-2-raw-v1"), {"split": "train", "streaming": True})]
    with pytest.raises(ConfigError, match="NLI corpus"):
        load_source("bogus:train", tmp_path)


def test_sts_source_is_the_distinct_task_sentences(tiny_data_dir, tmp_path):
    """``sts:<task>`` (BERT-flow's target-domain sentences): every sentence of the task once, no scores."""
    from sts_lightning.datamodules.sentence_files import source_paths
    from sts_lightning.sts.tasks import load_task

    (path,) = source_paths(["sts:stsb-dev+sick-trial"], str(tiny_data_dir), tmp_path, None)
    lines = path.read_text().splitlines()
    task = load_task("stsb-dev+sick-trial", tiny_data_dir)
    expected = {s for p in task.subsets.values() for s in (*p.sentences1, *p.sentences2)}
    assert len(lines) == len(set(lines)) and set(lines) == expected
    assert source_paths(["sts:stsb-dev+sick-trial"], str(tiny_data_dir), tmp_path, None) == [path]
    with pytest.raises(ConfigError, match="sts:stsb-dev"):
        source_paths(["sts:"], str(tiny_data_dir), tmp_path, None)


def test_missing_sentence_file_is_a_clear_error_with_a_cache_dir(tmp_path):
    """The cached index path used to stat() the file first and raise a bare FileNotFoundError."""
    with pytest.raises(DataError, match=r"nope\.txt: file not found"):
        SentenceIndex.build([tmp_path / "nope.txt"], tmp_path / "cache")


def test_held_out_sentences_are_the_tail_and_never_trained_on(sentence_file, tmp_path):
    kwargs = {"batch_size": 4, "seed": 5, "max_sentences": 30, "cache_dir": str(tmp_path / "c")}
    dm = SentenceDataModule(str(tmp_path / "data"), ["wiki/s.txt"], heldout_sentences=6, **kwargs)
    dm.setup("fit")
    full = SentenceIndex.build([sentence_file], tmp_path / "c", max_sentences=30)
    assert dm.heldout() == [full.sentence(i) for i in range(24, 30)]
    trained = {s for epoch in range(3) for s in _epoch(dm, epoch)}
    assert trained and not trained & set(dm.heldout())
    assert len(dm.dataset.index) == 24
    assert "held out (never trained on): the last 6" in dm.data_facts().notes[-1]
    plain = SentenceDataModule(str(tmp_path / "data"), ["wiki/s.txt"], **kwargs)
    plain.setup("fit")
    assert plain.heldout() == [] and len(plain.dataset.index) == 30 and not plain.data_facts().notes
    with pytest.raises(DataError, match="cannot hold out 30 of 30"):
        SentenceDataModule(str(tmp_path / "data"), ["wiki/s.txt"], heldout_sentences=30, **kwargs).setup("fit")
    with pytest.raises(DataError, match="heldout_sentences=-1"):
        SentenceDataModule(str(tmp_path / "data"), ["wiki/s.txt"], heldout_sentences=-1, **kwargs)


def _epoch(dm: SentenceDataModule, epoch: int) -> list[str]:
    dm.set_epoch(epoch)
    return [s for b in dm.train_dataloader() for s in b["sentences"]]
