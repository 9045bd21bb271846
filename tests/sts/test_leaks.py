"""Train/test leaks: which STS tasks a training data config holds, and the default config holds none it scores."""

from __future__ import annotations

import logging

import pytest
from hydra import compose, initialize_config_dir

from sts_lightning.sts.leaks import leaked_tasks, tasks_of_source, warn_leaks
from tests.paths import CONFIG_DIR


@pytest.mark.parametrize("source, tasks", [
    ("sick:train", {"sick-train"}),
    ("stsb:train", {"stsb-train"}),
    ("stsb:dev", {"stsb-dev"}),
    ("nli:sick:trial", {"sick-trial"}),
    ("sts:sts12+sts16+stsb-dev", {"sts12", "sts16", "stsb-dev"}),
    ("stsb/sts-dev.csv", {"stsb-dev"}),
    ("sick/SICK_train.txt", {"sick-train"}),
    ("sts/STS2012-en-test/STS.input.MSRvid.txt", {"sts12"}),
    ("snli:dev", set()),
    ("wiki/wiki_sentences_100k.txt", set()),
])
def test_tasks_of_source(source, tasks):
    assert tasks_of_source(source) == tasks


def _cfg(overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=[*overrides, "paths.data_dir=/data"])


@pytest.mark.parametrize("model", sorted(p.stem for p in (CONFIG_DIR / "model").glob("*.yaml")))
def test_no_default_model_trains_on_what_the_default_evaluation_scores(model):
    cfg = _cfg([f"model={model}"])
    assert leaked_tasks(cfg.data, list(cfg.callbacks.sts_evaluation.tasks)) == {}


def test_quickstart_scores_only_held_out_tasks():
    cfg = _cfg(["experiment=quickstart"])
    tasks = list(cfg.callbacks.sts_evaluation.tasks)
    assert len(tasks) == 4 and leaked_tasks(cfg.data, tasks) == {}


def test_a_leaking_config_warns_naming_the_task(caplog):
    cfg = _cfg(["data.sources=[snli:dev,sick:train]", "callbacks.sts_evaluation.tasks=[stsb-dev,sick-train+sick-trial]"])
    with caplog.at_level(logging.WARNING, logger="sts_lightning.sts.leaks"):
        leaks = warn_leaks(cfg.data, list(cfg.callbacks.sts_evaluation.tasks))
    assert leaks == {"sick-train": "sick:train"}
    assert "sick-train" in caplog.text and "not held out" in caplog.text


def test_a_source_evaluate_py_scores_by_default_warns_though_the_run_does_not_score_it(caplog):
    """sick:train with the callback's default [stsb-dev]: no overlap for the run, but `python evaluate.py`
    scores sick-train+sick-trial by default, so the export's SICK numbers would not be held out."""
    cfg = _cfg(["model=cosent", "data.sources=[stsb:train,sick:train]"])
    with caplog.at_level(logging.WARNING, logger="sts_lightning.sts.leaks"):
        leaks = warn_leaks(cfg.data, list(cfg.callbacks.sts_evaluation.tasks))
    assert leaks == {}
    assert "'sick:train' contains sick-train" in caplog.text and "python evaluate.py" in caplog.text
    assert "stsb-train" not in caplog.text  # STS-B train is no evaluation task
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sts_lightning.sts.leaks"):
        assert warn_leaks(cfg.data, ["stsb-dev", "sick-train"]) == {"sick-train": "sick:train"}
    assert caplog.text.count("sick-train") == 1  # one warning per leaked task, not two


def test_a_task_group_or_mteb_name_leaks_as_its_tasks():
    """``callbacks.sts_evaluation.tasks=[standard]`` scores sick-test; SICK-R is MTEB's name for all of SICK."""
    cfg = _cfg(["data.sources=[snli:dev,sick:test]"])
    assert leaked_tasks(cfg.data, ["standard"]) == {"sick-test": "sick:test"}
    assert leaked_tasks(cfg.data, ["SICK-R"]) == {"sick-test": "sick:test"}
    assert leaked_tasks(cfg.data, ["stsb-dev"]) == {}
