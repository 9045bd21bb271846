"""Every experiment file and every option of every config group runs ``fast_dev_run`` on the tiny model.

Why: a config that only composes can still fail at instantiation or on the first step (a renamed
argument, a wrong interpolation, a scheduler that needs a key the method lacks); this catches it on CPU
in seconds instead of on a GPU box. Each run keeps its file's settings and swaps in only what the tiny
fixtures need (each method's declared ``tiny`` settings: the data directory and its sources, small batches, small
nets), and ``trainer.accelerator=cpu`` / ``devices=1`` for the GPU groups (bf16-mixed autocast runs on CPU). The
methods and their option sets come from their declarations (``tests/method_cases.py``), never a list here.
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers import chosen_groups, experiment_names
from tests.helpers import compose_train_config as _cfg
from tests.method_cases import fast_dev_run_options, tiny_overrides

# Pipelines chain several trainings: tests/runs/test_pipeline_run.py runs one with tiny stages.
EXPERIMENTS = [name for name in experiment_names() if not name.startswith("pipeline/")]
COMMON = ["+trainer.fast_dev_run=true", "export=false", "callbacks.sts_evaluation.tasks=[stsb-dev]"]


def _fast_dev_run(tmp_path, model_dir, data_dir, overrides: list[str]) -> dict[str, float]:
    from sts_lightning.runs.train_run import train

    model, data = chosen_groups(overrides)
    tiny = [f"data={data}", *tiny_overrides(model, data, model_dir, tmp_path)]
    cfg = _cfg(tmp_path / "run", model_dir, data_dir, [*overrides, *tiny, *COMMON])
    metrics = train(cfg)
    assert metrics and all(torch.isfinite(torch.tensor(v)) for v in metrics.values()), metrics
    return metrics


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_fast_dev_run(name, tmp_path, tiny_model_dir, train_data_dir):  # noqa: F811
    metrics = _fast_dev_run(tmp_path, tiny_model_dir, train_data_dir, [f"experiment={name}"])
    assert "val/stsb-dev_spearman" in metrics


# Each method alone and with each option set its declaration names (tests/method_cases.py), then the other groups.
OPTIONS = [
    *fast_dev_run_options(),
    ["trainer=gpu", "trainer.accelerator=cpu"],
    ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=1"],
    ["logger=csv"],
    ["logger=wandb_offline"],
    ["logger=wandb"],  # online config; WANDB_MODE=offline below keeps it off the network
]

# Cases `make test-fast` leaves out (marked slow), by case id. model=ct: ~20 s in a full-suite run (issue 28),
# 1.7-1.8 s when run alone.
SLOW = {"model=ct"}


def _case(overrides: list[str]):
    case_id = " ".join(overrides)
    return pytest.param(overrides, id=case_id, marks=[pytest.mark.slow] if case_id in SLOW else [])


def test_slow_cases_are_cases():
    assert SLOW <= {" ".join(o) for o in OPTIONS}, "a slow case id names no case: its mark is lost"


@pytest.mark.parametrize("overrides", [_case(o) for o in OPTIONS])
def test_config_option_fast_dev_run(overrides, tmp_path, tiny_model_dir, train_data_dir, monkeypatch):  # noqa: F811
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    _fast_dev_run(tmp_path, tiny_model_dir, train_data_dir, overrides)
    if any(o.startswith("logger=wandb") for o in overrides):
        import wandb

        wandb.finish()
        wandb.teardown()  # else the offline mode outlives the env var in this process
