"""Fixtures for the end-to-end run tests: short trainings that several modules read (each method's run once a
session, not once a module), and the uninterrupted ``train.py`` runs that the stop tests' resumed runs equal."""

from __future__ import annotations

from pathlib import Path

import pytest

from sts_lightning.embeddings.methods.registry import method
from tests.helpers import compose_train_config, write_train_data
from tests.method_cases import tiny_overrides
from tests.runs import train_py
from tests.runs.run_equality import final_state


@pytest.fixture(scope="session")
def run_data_dir(tmp_path_factory, tiny_data_dir) -> Path:
    """``train_data_dir`` once a session, for the runs below: runs of several modules equal one uninterrupted run
    only when they read the same folder (the model card names it)."""
    return write_train_data(tiny_data_dir, tmp_path_factory.mktemp("run_data") / "data")


@pytest.fixture(scope="session")
def trained(tmp_path_factory, tiny_model_dir, run_data_dir):
    """(cfg, metrics, output dir) of a 2-batch SBERT-NLI run on the tiny fixtures, once a session (read only)."""
    from sts_lightning.runs.train_run import train

    out = tmp_path_factory.mktemp("run")
    # An epoch cut to 2 batches (not max_steps, which stops mid-epoch before the STS validation).
    cfg = compose_train_config(out, tiny_model_dir, run_data_dir, ["+trainer.limit_train_batches=2"])
    return cfg, train(cfg), out


@pytest.fixture(scope="session")
def method_run(tmp_path_factory, tiny_model_dir, run_data_dir):
    """``method_run(model)``: (metrics, run directory) of a 3-step exported run of ``model=<model>`` with its own
    data group and declared tiny settings, trained on the first request; test_model_defaults and test_model_cards
    read the same run."""
    import torch

    from sts_lightning.runs.train_run import train

    runs = {}

    def run(model: str) -> tuple[dict, Path]:
        if model not in runs:
            tmp = tmp_path_factory.mktemp(model)
            cfg = compose_train_config(tmp / "run", tiny_model_dir, run_data_dir,
                                       [f"model={model}", *tiny_overrides(model, method(model).data, tiny_model_dir, tmp),
                                        "trainer.max_steps=3", "callbacks.sts_evaluation.tasks=[stsb-dev]"])
            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # tiny tensors on 2 busy cores: thread hand-offs cost more than the maths
            try:
                runs[model] = (train(cfg), tmp / "run")
            finally:
                torch.set_num_threads(threads)
        return runs[model]

    return run


@pytest.fixture(scope="session")
def train_py_uninterrupted(tmp_path_factory, tiny_model_dir, run_data_dir) -> dict:
    """``final_state`` of the uninterrupted 8-step ``train.py`` run (``tests/runs/train_py.py``)."""
    out = tmp_path_factory.mktemp("uninterrupted")
    log = out.parent / f"{out.name}.log"
    proc = train_py.start(train_py.command(out, tiny_model_dir, run_data_dir, []), log, train_py.env())
    assert proc.wait(timeout=600) == 0, train_py.tails([log])
    return final_state(out)


@pytest.fixture(scope="session")
def train_py_ddp_uninterrupted(tmp_path_factory, tiny_model_dir, run_data_dir) -> dict:
    """The same run on 2 gloo ranks started as torchrun starts them."""
    out = tmp_path_factory.mktemp("ddp_uninterrupted")
    logs = out.parent / f"{out.name}_logs"
    procs = train_py.ranks(out, tiny_model_dir, run_data_dir, [], logs)
    assert [p.wait(timeout=600) for p in procs] == [0, 0], train_py.tails(sorted(logs.glob("*.log")))
    return final_state(out)
