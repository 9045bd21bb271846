"""``sts_lightning.process_state``: what a run changes in its process is put back, whether it ends or raises."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import warnings

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from sts_lightning.process_state import fresh_hydra, kept_process_state
from tests.paths import CONFIG_DIR


def _snapshot():
    root = logging.getLogger()
    return (dict(os.environ), os.getcwd(), list(root.handlers), root.level, signal.getsignal(signal.SIGTERM),
            list(warnings.filters), torch.get_num_threads(), GlobalHydra.instance().is_initialized())


def _change_everything(tmp_path):
    os.environ["PL_GLOBAL_SEED"] = "7"
    os.environ.pop("HOME", None)
    os.chdir(tmp_path)
    handler = logging.FileHandler(tmp_path / "train.log")
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.DEBUG)
    signal.signal(signal.SIGTERM, lambda *_: None)
    warnings.filterwarnings("ignore", message="anything")
    torch.set_num_threads(1)
    torch.manual_seed(123)
    random.seed(5)
    return handler


@pytest.mark.parametrize("fails", [False, True])
def test_everything_a_run_changes_is_put_back(tmp_path, fails):
    before, draws = _snapshot(), (torch.get_rng_state(), random.getstate())
    with pytest.raises(RuntimeError) if fails else contextlib.nullcontext():
        with kept_process_state():
            handler = _change_everything(tmp_path)
            if fails:
                raise RuntimeError("the run failed")
    assert _snapshot() == before
    assert torch.equal(torch.get_rng_state(), draws[0]) and random.getstate() == draws[1]
    assert handler.stream is None  # the run's log file is closed, not left open


def test_a_callers_hydra_app_keeps_its_state():
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3", job_name="callers_app"):
        with fresh_hydra():
            assert not GlobalHydra.instance().is_initialized()
            with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3", job_name="train"):
                compose(config_name="evaluate")
        assert GlobalHydra.instance().is_initialized()
        from hydra.core.utils import JobRuntime

        assert JobRuntime.instance().get("name") == "callers_app"
        assert compose(config_name="evaluate").encoder is not None
