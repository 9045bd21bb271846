"""Data layer: NLI readers (skip-and-count policy), global batch size, and the rank x worker sentence stream.

Ranks and workers are simulated (pure ``shard_indices`` and explicit rank/world_size); the real DDP run
is tested elsewhere. One test does start 2 real DataLoader workers to exercise ``get_worker_info``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from sts_lightning.datamodules.cached_embeddings import CachedEmbeddingDataModule
from sts_lightning.datamodules.loader import ResumableDataModule, per_device_batch_size
from sts_lightning.datamodules.nli import NLIDataModule, collate_nli
from sts_lightning.datamodules.nli_readers import load_source, read_hub_nli
from sts_lightning.datamodules.sentence_files import SentenceIndex
from sts_lightning.datamodules.sentence_stream import SentenceStream, collate_sentences, shard_indices
from sts_lightning.datamodules.sentences import SentenceDataModule
from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.embeddings.io.npy_cache import save_npy_cache

PAIRS = [("a man plays a guitar .", "a man plays music .", "entailment"),
         ("a dog runs in the park .", "a cat sleeps .", "contradiction"),
         ("a woman cuts an onion .", "a woman cooks dinner .", "neutral")]


def write_senteval(root: Path, split: str, rows, labels_extra: int = 0) -> Path:
    folder = root / "nli" / "snli"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"s1.{split}").write_text("".join(f"{a} \n" for a, _, _ in rows))
    (folder / f"s2.{split}").write_text("".join(f"{b} \n" for _, b, _ in rows))
    (folder / f"labels.{split}").write_text("".join(f"{y}\n" for *_, y in rows) + "neutral\n" * labels_extra)
    return folder


def test_senteval_strips_trailing_spaces_and_maps_labels(tmp_path):
    write_senteval(tmp_path, "dev", PAIRS + [("x y .", "z .", "-")])
    pairs = load_source("snli:dev", tmp_path)
    assert pairs.premises[0] == "a man plays a guitar ." and pairs.hypotheses[1] == "a cat sleeps ."
    assert pairs.labels == [0, 2, 1]
    assert pairs.unlabeled == 1 and not pairs.skipped  # "-" = no gold label: counted, not malformed


def test_senteval_line_count_mismatch_names_files(tmp_path):
    folder = write_senteval(tmp_path, "dev", PAIRS, labels_extra=1)
    with pytest.raises(DataError, match=r"labels\.dev has 4") as err:
        load_source("snli:dev", tmp_path)
    assert str(folder / "s1.dev") in str(err.value)


def test_sick_entailment_judgment(tmp_path):
    (tmp_path / "sick").mkdir()
    lines = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
    lines += [f"{i}\t{a}\t{b}\t3.0\t{y.upper()}" for i, (a, b, y) in enumerate(PAIRS)]
    lines += ["9\tonly\tthree"]  # wrong column count: skipped and counted
    (tmp_path / "sick" / "SICK_trial.txt").write_text("\r\n".join(lines) + "\r\n")
    pairs = load_source("sick:trial", tmp_path, max_malformed_fraction=0.5)
    assert pairs.labels == [0, 2, 1] and pairs.premises[2] == "a woman cuts an onion ."
    assert sum(pairs.skipped.values()) == 1 and "wrong column count" in next(iter(pairs.skipped))


def test_malformed_rows_skipped_counted_and_threshold(tmp_path, caplog):
    rows = PAIRS * 40 + [("a b .", "c d .", "maybe"), (" ", "c d .", "neutral")]
    folder = write_senteval(tmp_path, "train", rows)
    with caplog.at_level(logging.WARNING):
        pairs = load_source("snli:train", tmp_path, max_malformed_fraction=0.02)
    assert len(pairs) == 120 and sum(pairs.skipped.values()) == 2
    assert pairs.skipped["empty sentence"] == 1 and pairs.skipped["unknown label 'maybe'"] == 1
    assert str(folder) in caplog.text and "line 121" in caplog.text and "line 122" in caplog.text
    with pytest.raises(DataError, match="max_malformed_fraction"):
        load_source("snli:train", tmp_path)  # default 1% < 2/122


def test_hub_skips_unlabeled(monkeypatch):
    import datasets

    fake = datasets.Dataset.from_dict({"premise": ["p1", "p2", "p3"], "hypothesis": ["h1", "h2", "h3"],
                                       "label": [0, -1, 2]})
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: fake)
    pairs = read_hub_nli("snli", "train")
    assert pairs.labels == [0, 2] and pairs.unlabeled == 1 and pairs.source == "hub:stanfordnlp/snli/train"


def test_global_batch_must_divide_by_world_size(tmp_path):
    assert per_device_batch_size(12, 3) == 4
    write_senteval(tmp_path, "dev", PAIRS)
    dm = NLIDataModule(str(tmp_path), ["snli:dev"], batch_size=10)
    dm.trainer = SimpleNamespace(world_size=3)
    with pytest.raises(ConfigError, match="batch_size=10"):
        dm.setup("fit")


def test_nli_batch_is_strings_and_labels(tmp_path):
    write_senteval(tmp_path, "dev", PAIRS * 3)
    dm = NLIDataModule(str(tmp_path), "snli:dev", batch_size=4, seed=1)
    batch = next(iter(dm.train_dataloader()))
    assert set(batch) == {"sentences1", "sentences2", "labels"}
    assert len(batch["sentences1"]) == len(batch["sentences2"]) == 4 and isinstance(batch["sentences1"][0], str)
    assert batch["labels"].dtype == torch.long and batch["labels"].shape == (4,)
    assert collate_nli([("a", "b", 2)])["labels"].tolist() == [2]


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


@pytest.fixture()
def sentence_file(tmp_path) -> Path:
    lines = [f"sentence number {i} here" for i in range(40)]
    lines[3], lines[10], lines[20] = "", "   \t ", ""
    raw = "\n".join(lines).encode() + b"\n\xff\xfe broken\n"
    path = tmp_path / "data" / "wiki" / "s.txt"
    path.parent.mkdir(parents=True)
    path.write_bytes(raw)
    return path


def test_index_skips_and_counts_empty_and_undecodable(sentence_file, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        index = SentenceIndex.build([sentence_file], tmp_path / "cache")
    assert len(index) == 37 and index.skipped == {"empty": 3, "not UTF-8": 1}
    assert f"{sentence_file}:4" in caplog.text and f"{sentence_file}:41" in caplog.text
    assert all(index.sentence(i).startswith("sentence number") for i in range(len(index)))
    assert len(list((tmp_path / "cache" / "sentence-index").glob("*.npz"))) == 1
    cached = SentenceIndex.build([sentence_file], tmp_path / "cache", min_words=1, max_sentences=5)
    assert len(cached) == 5 and cached.sentence(4) == index.sentence(4)
    with pytest.raises(DataError, match="no usable sentences"):
        SentenceIndex.build([sentence_file], None, max_words=3)  # every line has 4 words


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


def test_nli_loader_resumes_mid_epoch_and_reshuffles_per_epoch(tmp_path):
    """The restored position (epoch, batches done) makes the next iterator continue that epoch's
    permutation; each epoch has its own permutation, a function of (seed, epoch) only."""
    write_senteval(tmp_path, "dev", [(f"premise {i} .", f"hypothesis {i} .", "neutral") for i in range(20)])

    def module():
        dm = NLIDataModule(str(tmp_path), "snli:dev", batch_size=2, seed=7)
        dm.setup("fit")
        return dm

    def batches(dm):
        return [tuple(b["sentences1"]) for b in dm.train_dataloader()]

    dm = module()
    epoch0 = batches(dm)
    dm.load_state_dict({"epoch": 1, "batches_done": 0})
    epoch1 = batches(dm)
    assert epoch0 != epoch1 and sorted(epoch0) != epoch0
    assert sorted(s for b in epoch0 for s in b) == sorted(s for b in epoch1 for s in b)
    resumed = module()
    resumed.load_state_dict({"epoch": 1, "batches_done": 3})
    assert batches(resumed) == epoch1[3:]
    assert batches(module()) == epoch0  # (seed, epoch) alone fixes the order
    assert dm.state_dict() == {}  # no trainer attached: nothing to save


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


def test_cached_embedding_loader_resumes_mid_epoch(tmp_path):
    """BERT-flow's feature DataModule: a loader restored after ``k`` batches of an epoch yields exactly the
    remaining batches of the uninterrupted one; each epoch has its own (seed, epoch) permutation. The feature
    cache is written with ``embeddings.io.npy_cache`` under the module's own key, so nothing is encoded."""
    (tmp_path / "data" / "wiki").mkdir(parents=True)
    (tmp_path / "data" / "wiki" / "s.txt").write_text("".join(f"sentence number {i}\n" for i in range(22)))

    def module() -> CachedEmbeddingDataModule:
        return CachedEmbeddingDataModule(str(tmp_path / "data"), ["wiki/s.txt"], model_name_or_path="no-such-model",
                                         pooling="mean", batch_size=4, seed=11, cache_dir=str(tmp_path / "cache"))

    first = module()
    assert isinstance(first, ResumableDataModule)
    key = first.cache_key()
    save_npy_cache(first.cache_path(key), np.arange(22 * 3, dtype=np.float32).reshape(22, 3), {"key": key})

    def batches(dm) -> list[tuple[float, ...]]:
        return [tuple(b[0][:, 0].tolist()) for b in dm.train_dataloader()]

    epoch0 = batches(first)
    first.load_state_dict({"epoch": 1, "batches_done": 0})
    epoch1 = batches(first)
    assert len(epoch0) == 6 and epoch0 != epoch1 and sorted(sum(epoch0, ())) == sorted(sum(epoch1, ()))
    for k in (1, 3, 5):
        resumed = module()
        resumed.load_state_dict({"epoch": 1, "batches_done": k})
        assert batches(resumed) == epoch1[k:], k
    assert batches(module()) == epoch0  # (seed, epoch) alone fixes the order
