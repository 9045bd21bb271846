"""STS readers on every original format, and one clear error per kind of bad input."""

from __future__ import annotations

import numpy as np
import pytest

from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.sts.readers import read_semeval_dir, read_sick, read_stsb
from sts_lightning.sts.tasks import DATA_DIR_ENV, load_task, resolve_data_dir


def test_stsb_uses_first_seven_columns_and_keeps_quotes(tmp_path):
    f = tmp_path / "sts-dev.csv"
    f.write_text('g\tf\ty\t1\t2.5\tHe said "hi\tShe left.\tlicence\textra\ng\tf\ty\t2\t0\ta b\tc d\n')
    pairs = read_stsb(f)
    assert pairs.sentences1 == ['He said "hi', "a b"]
    assert pairs.sentences2 == ["She left.", "c d"]
    np.testing.assert_allclose(pairs.scores, [2.5, 0.0])


def test_sick_crlf_and_header(tiny_data_dir):
    pairs = read_sick(tiny_data_dir / "sick" / "SICK_trial.txt")
    assert len(pairs) == 6
    assert not any(s.endswith("\r") for s in pairs.sentences2)


def test_semeval_both_namings_blank_gold_skipped(tiny_data_dir):
    s12 = read_semeval_dir(tiny_data_dir / "sts" / "STS2012-en-test")
    assert list(s12) == ["MSRvid"]  # STS.gs.ALL.txt has no input file: ignored
    s16 = read_semeval_dir(tiny_data_dir / "sts" / "STS2016-en-test")
    assert len(s16["headlines"]) == 5  # one blank gold line skipped
    assert "a dog runs in the park ." not in s16["headlines"].sentences1


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("g\tf\ty\t1\t2.5\tonly six columns", "sts-dev.csv:2: expected at least 7"),
        ("g\tf\ty\t1\tfive\ta\tb", "sts-dev.csv:2: score 'five' is not a number"),
        ("g\tf\ty\t1\t2.0\t \tb", "sts-dev.csv:2: sentence 1 is empty"),
        ("g\tf\ty\t1\tnan\ta\tb", "sts-dev.csv:2: score 'nan' is not finite"),
    ],
)
def test_stsb_malformed_rows_name_file_and_line(tmp_path, line, message):
    f = tmp_path / "sts-dev.csv"
    f.write_text("g\tf\ty\t0\t1.0\tfine\tok\n" + line + "\n")
    with pytest.raises(DataError, match=message):
        read_stsb(f)


def test_sick_wrong_column_count(tmp_path):
    f = tmp_path / "SICK_trial.txt"
    f.write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n1\ta\tb\t3.0\n")
    with pytest.raises(DataError, match=r"SICK_trial.txt:2: expected 5 tab-separated columns, found 4"):
        read_sick(f)


def test_semeval_line_count_mismatch(tmp_path):
    (tmp_path / "STS.input.x.txt").write_text("a\tb\nc\td\n")
    (tmp_path / "STS.gs.x.txt").write_text("1.0\n")
    with pytest.raises(DataError, match="has 1 lines but"):
        read_semeval_dir(tmp_path)


def test_missing_data_dir_says_what_to_provide(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setattr("sts_lightning.embeddings.io.data_dir.CHECKOUT_DATA_DIR", tmp_path / "no-shared-data")
    with pytest.raises(DataError, match="STS_DATA_DIR") as err:
        resolve_data_dir(None)
    assert "stsb/sts-dev.csv" in str(err.value)
    with pytest.raises(DataError, match="does not exist"):
        resolve_data_dir(tmp_path / "nope")


def test_missing_task_file_lists_paths(tiny_data_dir):
    with pytest.raises(DataError, match=r"(?s)task 'stsb-test'.*sts-test.csv"):
        load_task("stsb-test", tiny_data_dir)


def test_unknown_task_lists_valid(tiny_data_dir):
    with pytest.raises(ConfigError, match="(?s)unknown STS task 'sts99'.*stsb-dev"):
        load_task("sts99", tiny_data_dir)


def test_pooled_task(tiny_data_dir):
    task = load_task("stsb-dev+sick-trial", tiny_data_dir)
    assert set(task.subsets) == {"stsb-dev/dev", "sick-trial/trial"}
    assert task.num_pairs == 12


def test_data_dir_defaults_to_shared_data_beside_the_checkout(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setattr("sts_lightning.embeddings.io.data_dir.CHECKOUT_DATA_DIR", tmp_path)
    assert resolve_data_dir(None) == tmp_path
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "env"))  # the environment variable wins
    with pytest.raises(DataError, match="env does not exist"):
        resolve_data_dir(None)
