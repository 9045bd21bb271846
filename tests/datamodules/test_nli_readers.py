"""NLI readers (datamodules.nli_readers): SentEval and SICK files, the skip-and-count policy for malformed
rows, and hub rows without a gold label.
"""

from __future__ import annotations

import logging

import pytest

from sts_lightning.datamodules.nli_readers import load_source, read_hub_nli
from sts_lightning.embeddings.errors import DataError
from tests.helpers import SENTEVAL_PAIRS, write_senteval


def test_senteval_strips_trailing_spaces_and_maps_labels(tmp_path):
    write_senteval(tmp_path, "dev", SENTEVAL_PAIRS + [("x y .", "z .", "-")])
    pairs = load_source("snli:dev", tmp_path)
    assert pairs.premises[0] == "a man plays a guitar ." and pairs.hypotheses[1] == "a cat sleeps ."
    assert pairs.labels == [0, 2, 1]
    assert pairs.unlabeled == 1 and not pairs.skipped  # "-" = no gold label: counted, not malformed


def test_senteval_line_count_mismatch_names_files(tmp_path):
    folder = write_senteval(tmp_path, "dev", SENTEVAL_PAIRS, labels_extra=1)
    with pytest.raises(DataError, match=r"labels\.dev has 4") as err:
        load_source("snli:dev", tmp_path)
    assert str(folder / "s1.dev") in str(err.value)


def test_sick_entailment_judgment(tmp_path):
    (tmp_path / "sick").mkdir()
    lines = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
    lines += [f"{i}\t{a}\t{b}\t3.0\t{y.upper()}" for i, (a, b, y) in enumerate(SENTEVAL_PAIRS)]
    lines += ["9\tonly\tthree"]  # wrong column count: skipped and counted
    (tmp_path / "sick" / "SICK_trial.txt").write_text("\r\n".join(lines) + "\r\n")
    pairs = load_source("sick:trial", tmp_path, max_malformed_fraction=0.5)
    assert pairs.labels == [0, 2, 1] and pairs.premises[2] == "a woman cuts an onion ."
    assert sum(pairs.skipped.values()) == 1 and "wrong column count" in next(iter(pairs.skipped))


def test_malformed_rows_skipped_counted_and_threshold(tmp_path, caplog):
    rows = SENTEVAL_PAIRS * 40 + [("a b .", "c d .", "maybe"), (" ", "c d .", "neutral")]
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
