"""MTEB's STS task names in ``load_task`` (so ``evaluate.py tasks=[STS12,SICK-R]`` works) and their errors."""

from __future__ import annotations

import numpy as np
import pytest

from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.sts.tasks import MTEB_TASKS, load_task


def test_mteb_names_load_the_same_pairs_under_their_own_name(tiny_data_dir):
    for mteb_name, ours in (("STS12", "sts12"), ("STS16", "sts16")):
        task, ref = load_task(mteb_name, tiny_data_dir), load_task(ours, tiny_data_dir)
        assert task.name == mteb_name and list(task.subsets) == list(ref.subsets)
        for name, pairs in task.subsets.items():
            assert pairs.sentences1 == ref.subsets[name].sentences1
            assert np.array_equal(pairs.scores, ref.subsets[name].scores)
    assert set(MTEB_TASKS) == {"STSBenchmark", "SICK-R", "STS12", "STS13", "STS14", "STS15", "STS16"}


@pytest.mark.parametrize(("name", "words"), [
    ("STS13", ["STS2013-en-test", "STS.gs.<set>.txt", "data_source=hub", "1500 pairs"]),
    ("STSBenchmark", ["stsb-test", "stsb/sts-test.csv", "stsb-dev", "1379 pairs"]),
    ("SICK-R", ["SICK_test_annotated.txt", "sick-train+sick-trial", "9927 pairs"]),
])
def test_missing_mteb_sets_name_the_files_and_the_local_alternative(name, words, tiny_data_dir):
    with pytest.raises(DataError) as err:
        load_task(name, tiny_data_dir)
    message = str(err.value)
    assert "\n" not in message and all(w in message for w in words), message


def test_unknown_task_lists_mteb_names_too(tiny_data_dir):
    with pytest.raises(ConfigError, match="SICK-R.*STSBenchmark.*stsb-dev"):
        load_task("STS17", tiny_data_dir)
