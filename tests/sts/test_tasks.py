"""sts.tasks: task groups (issue 27), what ``evaluate.py --help`` lists, works as ``tasks=standard`` and ``tasks=[standard]``.

A tmp data directory holds all seven standard sets, each a few rows in its reader's real format (SemEval
folders for STS12-16, the STS-B csv, the SICK txt with its header): ``tasks=standard`` gives seven columns.
The shared-data-like directory of ``tiny_data_dir`` lacks five of them: one line names every file to provide.

Also here: MTEB's STS task names in ``load_task`` (so ``evaluate.py tasks=[STS12,SICK-R]`` works) and their errors.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from sts_lightning.callbacks.sts_evaluation import STSEvaluationCallback
from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.sts.tasks import (
    MTEB_TASKS,
    STANDARD_TASKS,
    TASK_GROUPS,
    expand_groups,
    load_task,
    load_tasks,
)
from tests.paths import CONFIG_DIR

PAIRS = [("a man plays a guitar .", "a man plays the piano .", 3.2),
         ("a woman cuts an onion .", "a woman slices a tomato .", 2.0),
         ("a dog runs in the park .", "a dog is running in the park .", 4.8),
         ("a child reads a book .", "two cats eat food .", 0.2)]


def write_standard_sets(root: Path) -> Path:
    """STS12-16, STS-B test and SICK test, as the original releases lay them out (tiny)."""
    for year, subset in ((2012, "MSRvid"), (2013, "headlines"), (2014, "images"), (2015, "forums"), (2016, "answer")):
        folder = root / "sts" / f"STS{year}-en-test"
        folder.mkdir(parents=True)
        prefix = "STS2016" if year == 2016 else "STS"
        (folder / f"{prefix}.input.{subset}.txt").write_text("".join(f"{a}\t{b}\n" for a, b, _ in PAIRS))
        (folder / f"{prefix}.gs.{subset}.txt").write_text("".join(f"{s}\n" for _, _, s in PAIRS))
    (root / "stsb").mkdir()
    (root / "stsb" / "sts-test.csv").write_text(
        "".join(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{s:.3f}\t{a}\t{b}\n" for i, (a, b, s) in enumerate(PAIRS)))
    (root / "sick").mkdir()
    rows = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
    rows += [f"{i}\t{a}\t{b}\t{1 + s * 0.8:.1f}\tNEUTRAL" for i, (a, b, s) in enumerate(PAIRS)]
    (root / "sick" / "SICK_test_annotated.txt").write_text("\n".join(rows) + "\n")
    return root


@pytest.fixture(scope="module")
def standard_data_dir(tmp_path_factory) -> Path:
    return write_standard_sets(tmp_path_factory.mktemp("standard_data"))


def test_standard_loads_its_seven_sets(standard_data_dir):
    tasks = load_tasks("standard", standard_data_dir)
    assert [t.name for t in tasks] == STANDARD_TASKS == TASK_GROUPS["standard"]
    assert all(t.num_pairs == len(PAIRS) for t in tasks)


def test_groups_expand_in_order_each_task_once():
    assert expand_groups(["stsb-dev", "standard", "sts12"]) == ["stsb-dev", *STANDARD_TASKS]
    assert expand_groups(["default"]) == TASK_GROUPS["default"]


@pytest.mark.parametrize("override", ["tasks=standard", "tasks=[standard]"])
def test_evaluate_gives_seven_columns(override, tmp_path, tiny_model_dir, standard_data_dir, one_thread):
    from sts_lightning.runs.evaluate_run import evaluate

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=[f"encoders=[{tiny_model_dir}]", "scorers=[mean]",
                                                         f"paths.data_dir={standard_data_dir}", override])
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path / "out")
    (result,) = evaluate(cfg)
    assert list(result["tasks"]) == STANDARD_TASKS
    header = (tmp_path / "out" / "results.md").read_text().splitlines()[0]
    assert "avg (7 standard)" in header
    assert list(json.loads((tmp_path / "out" / "results.json").read_text())["results"][0]["tasks"]) == STANDARD_TASKS


def test_missing_sets_of_a_group_are_one_line_naming_every_file(tiny_data_dir):
    """tiny_data_dir holds STS12, STS16, STS-B dev/train and SICK trial, like ../shared/data."""
    with pytest.raises(DataError) as err:
        load_tasks(["standard"], tiny_data_dir)
    message = str(err.value)
    assert "\n" not in message and message.startswith("task group 'standard': 5 of 7 sets are not in")
    for needed in ("sts13 needs sts/STS2013-en-test/STS.input.<set>.txt", "sts14 needs", "sts15 needs",
                   "stsb-test needs stsb/sts-test.csv", "sick-test needs sick/SICK_test_annotated.txt"):
        assert needed in message
    assert not re.search(r"sts12 needs|sts16 needs", message)  # those are there


def test_a_malformed_set_in_a_group_still_names_its_file_and_line(tmp_path, standard_data_dir):
    root = shutil.copytree(standard_data_dir, tmp_path / "data")
    (root / "stsb" / "sts-test.csv").write_text("main-captions\tMSRvid\t2012test\t0001\tabc\ta man .\ta dog .\n")
    with pytest.raises(DataError, match=r"sts-test\.csv:1: score 'abc' is not a number"):
        load_tasks("standard", root)


def test_a_group_given_to_load_task_says_it_is_a_group():
    with pytest.raises(ConfigError, match="'standard' is a task group"):
        load_task("standard", "/nonexistent")


def test_the_training_callback_expands_groups():
    """``callbacks.sts_evaluation.tasks=[standard]``: the same names, one val/<task>_spearman each."""
    assert STSEvaluationCallback(tasks=["standard"]).task_names == STANDARD_TASKS
    assert STSEvaluationCallback(tasks="standard").task_names == STANDARD_TASKS


def test_every_name_the_help_lists_as_a_task_row_is_a_group():
    """The reported bug: --help listed `standard` and `tasks=standard` failed. Every first-column name of the
    Tasks section is now a group (placeholders such as <local task> are in angle brackets)."""
    from sts_lightning.runs.help_text import evaluate_sections

    tasks = next(s for s in evaluate_sections() if s.startswith("Tasks"))
    rows = [line.split()[0] for line in tasks.splitlines()[2:] if line.startswith("  ") and not line.startswith("   ")]
    names = [r for r in rows if not r.startswith("<")]
    assert names == list(TASK_GROUPS) and "standard" in names


# ---------------------------------------------------------------- MTEB's task names


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
