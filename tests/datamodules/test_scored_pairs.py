"""Scored-pair training data (``datamodules.scored_pairs``): scores normalised by each source's scale, malformed
rows skipped + counted + refused above the limit, source names checked before any file is read, the global batch
split over ranks, and a restored loader that continues the interrupted epoch."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch
from lightning.fabric.utilities.distributed import DistributedSamplerWrapper

from sts_lightning.datamodules.scored_pair_readers import load_scored_source
from sts_lightning.datamodules.scored_pairs import ScoredPairsDataModule, collate_scored_pairs
from sts_lightning.embeddings.errors import ConfigError, DataError
from tests.helpers import assert_resumes_mid_epoch, write_senteval

PAIRS = [(f"sentence {i} one .", f"sentence {i} two .") for i in range(20)]


def write_stsb(root, split="train", rows=None, extra=()):
    (root / "stsb").mkdir(parents=True, exist_ok=True)
    rows = rows if rows is not None else [(a, b, f"{i % 6:.3f}") for i, (a, b) in enumerate(PAIRS)]
    lines = [f"main-captions\tMSRvid\t2012test\t{i:04d}\t{s}\t{a}\t{b}" for i, (a, b, s) in enumerate(rows)]
    (root / "stsb" / f"sts-{split}.csv").write_text("\n".join([*lines, *extra]) + "\n")


def write_sick(root, split="train", scores=(1.0, 3.0, 5.0)):
    (root / "sick").mkdir(parents=True, exist_ok=True)
    lines = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
    lines += [f"{i}\t{a}\t{b}\t{s}\tNEUTRAL" for i, ((a, b), s) in enumerate(zip(PAIRS[:len(scores)], scores, strict=True))]
    (root / "sick" / f"SICK_{split}.txt").write_text("\r\n".join(lines) + "\r\n")


def test_scores_normalised_by_each_sources_scale(tmp_path):
    write_stsb(tmp_path)
    write_sick(tmp_path)
    stsb = load_scored_source("stsb:train", tmp_path)
    assert len(stsb) == 20 and stsb.scores[:6] == pytest.approx([0, 0.2, 0.4, 0.6, 0.8, 1.0])  # 0-5 -> /5
    assert stsb.sentences1[0] == "sentence 0 one ." and stsb.sentences2[0] == "sentence 0 two ."
    sick = load_scored_source("sick:train", tmp_path)
    assert sick.scores == pytest.approx([0.0, 0.5, 1.0])  # 1-5 -> (s - 1) / 4
    dm = ScoredPairsDataModule(str(tmp_path), ["stsb:train", "sick:train"], batch_size=4)
    dm.setup("fit")
    assert len(dm.dataset) == 23 and min(dm.dataset.scores) == 0.0 and max(dm.dataset.scores) == 1.0
    facts = dm.data_facts()
    assert facts.rows == 23 and dict(facts.per_source) == {"stsb:train": 20, "sick:train": 3}


def test_the_tiny_fixture_sts_b_train_reads_with_licence_columns(tiny_data_dir):
    pairs = load_scored_source("stsb:train", tiny_data_dir)
    assert len(pairs) == 4 and pairs.scores[2] == pytest.approx(4.8 / 5) and not pairs.skipped


def test_malformed_rows_skipped_counted_and_threshold(tmp_path, caplog):
    rows = [(a, b, "2.5") for a, b in PAIRS * 5]
    rows += [("a b .", "c d .", "abc"), ("a b .", "c d .", "7"), (" ", "c d .", "1"), ("a b .", "c d .", "nan")]
    write_stsb(tmp_path, rows=rows, extra=["only\tfour\tcolumns\there", ""])
    with caplog.at_level(logging.WARNING):
        pairs = load_scored_source("stsb:train", tmp_path, max_malformed_fraction=0.1)
    assert len(pairs) == 100 and sum(pairs.skipped.values()) == 6
    assert pairs.skipped == {"score is not a finite number": 2, "score outside the 0-5 scale": 1, "empty sentence": 1,
                             "wrong column count (expected at least 7)": 1, "blank line": 1}
    assert "sts-train.csv" in caplog.text and "line 101, 104" in caplog.text and "line 106" in caplog.text
    with pytest.raises(DataError, match="skipped 6 of 106 rows.*max_malformed_fraction=0.01"):
        load_scored_source("stsb:train", tmp_path)  # default 1% < 6/106


def test_undecodable_and_wrong_column_count_in_sick(tmp_path):
    write_sick(tmp_path, scores=(1, 2, 3, 4, 5))
    path = tmp_path / "sick" / "SICK_train.txt"
    path.write_bytes(path.read_bytes() + b"9\tbad \xff byte\tb\t3\tNEUTRAL\r\n7\tthree\tcols\r\n")
    pairs = load_scored_source("sick:train", tmp_path, max_malformed_fraction=0.5)
    assert len(pairs) == 5 and pairs.skipped == {"not UTF-8": 1, "wrong column count (expected 5)": 1}


@pytest.mark.parametrize("sources, match", [(["stsb:dev", "snli:dev"], "unknown scored-pair source 'snli:dev'"),
                                             (["stsb:validation"], "stsb:dev, stsb:test, stsb:train"),
                                             (["nli:stsb:train"], "unknown NLI source in 'nli:stsb:train'"),
                                             (["nli:my/nli.xlsx"], "xlsx"),
                                             ([], "data.sources is empty")])
def test_bad_source_names_fail_before_reading(sources, match):
    with pytest.raises(ConfigError, match=match):
        ScoredPairsDataModule("/nonexistent", sources)


def test_nli_reads_as_angles_recipe(tmp_path):
    """``nli:<source>``: entailment 1, contradiction 0, neutral dropped (AnglE's examples/NLI/train_nli.py)."""
    rows = [("a man sleeps .", "a person rests .", "entailment"), ("a dog barks .", "a cat meows .", "contradiction"),
            ("a girl runs .", "she is late .", "neutral"), ("two men talk .", "people speak .", "entailment")]
    write_senteval(tmp_path, "dev", rows)
    pairs = load_scored_source("nli:snli:dev", tmp_path)
    assert pairs.sentences1 == ["a man sleeps .", "a dog barks .", "two men talk ."]
    assert pairs.sentences2 == ["a person rests .", "a cat meows .", "people speak ."]
    assert pairs.scores == [1.0, 0.0, 1.0]
    write_senteval(tmp_path / "neutral", "dev", rows[2:3])
    with pytest.raises(DataError, match="no entailment or contradiction"):
        load_scored_source("nli:snli:dev", tmp_path / "neutral")


def test_missing_file_names_it(tmp_path):
    with pytest.raises(DataError, match="SICK_trial.txt"):
        load_scored_source("sick:trial", tmp_path)


def test_batch_is_strings_and_float_scores(tmp_path):
    write_stsb(tmp_path)
    dm = ScoredPairsDataModule(str(tmp_path), "stsb:train", batch_size=4, seed=1)
    batch = next(iter(dm.train_dataloader()))
    assert set(batch) == {"sentences1", "sentences2", "scores"} and len(batch["sentences1"]) == 4
    assert batch["scores"].dtype == torch.float32 and batch["scores"].shape == (4,)
    assert collate_scored_pairs([("a", "b", 0.25)])["scores"].tolist() == [0.25]


def test_global_batch_is_split_over_ranks(tmp_path):
    """batch_size is GLOBAL: 2 ranks get 4 each; the shards Lightning's wrapper cuts from the (same on every
    rank) permutation cover every pair once, and a batch size the world size does not divide is refused."""
    write_stsb(tmp_path)
    ranks = []
    for rank in range(2):
        dm = ScoredPairsDataModule(str(tmp_path), "stsb:train", batch_size=8, seed=3)
        dm.trainer = SimpleNamespace(world_size=2)
        dm.setup("fit")
        loader = dm.train_dataloader()
        assert loader.batch_size == 4
        ranks.append(list(DistributedSamplerWrapper(loader.sampler, num_replicas=2, rank=rank, shuffle=False)))
    assert sorted(ranks[0] + ranks[1]) == list(range(20)) and len(ranks[0]) == len(ranks[1])
    dm = ScoredPairsDataModule(str(tmp_path), "stsb:train", batch_size=9)
    dm.trainer = SimpleNamespace(world_size=2)
    with pytest.raises(ConfigError, match="batch_size=9"):
        dm.setup("fit")


def test_loader_resumes_mid_epoch_and_reshuffles_per_epoch(tmp_path):
    write_stsb(tmp_path)

    def module():
        dm = ScoredPairsDataModule(str(tmp_path), "stsb:train", batch_size=2, seed=7)
        dm.setup("fit")
        return dm

    assert_resumes_mid_epoch(module)
