"""Config errors come before torch is imported, from the entry points as a user runs them."""

from __future__ import annotations

import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.runs.early_checks import precheck_evaluate, precheck_train
from tests.paths import ROOT

# Runs an entry point as `python <script> <overrides>` and reports, at exit, whether torch was ever imported.
PROBE = ("import atexit, runpy, sys; atexit.register(lambda: print('torch imported:', 'torch' in sys.modules)); "
         "script = sys.argv[1]; sys.argv = sys.argv[1:]; runpy.run_path(script, run_name='__main__')")


@pytest.mark.parametrize(("script", "override", "message"), [
    ("train.py", "model.lr=abc", "model.lr='abc' is not allowed"),
    ("train.py", "data.batch_size=0", "data.batch_size=0 is not allowed"),
    ("evaluate.py", "encoder.batch_size=0", "encoder.batch_size=0 is not allowed"),
    ("evaluate.py", "scorers=[]", "no scorers configured"),
    ("evaluate.py", "bootstrap.samples=-1", "bootstrap.samples=-1 is not allowed"),
    ("train.py", "seeds=[0,0]", "seeds lists a seed twice"),
])
def test_config_error_is_one_line_before_torch_loads(script, override, message, tmp_path):
    done = subprocess.run([sys.executable, "-c", PROBE, script, override, f"hydra.run.dir={tmp_path}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("error: ")
    assert message in done.stderr
    assert "torch imported: False" in done.stdout


def test_mini_batch_size_is_checked_early_when_the_device_count_is_a_number():
    cfg = OmegaConf.create({"model": {"mini_batch_size": 24}, "data": {"batch_size": 64},
                            "trainer": {"devices": 2, "num_nodes": 1}})
    with pytest.raises(ConfigError, match="must divide the per-device batch 32"):
        precheck_train(cfg)
    cfg.trainer.devices = "auto"  # needs torch to count GPUs: left to train()
    precheck_train(cfg)


def test_evaluate_needs_tasks_encoders_and_scorers():
    with pytest.raises(ConfigError, match="no tasks configured"):
        precheck_evaluate(OmegaConf.create({"tasks": [], "encoders": ["x"], "scorers": ["mean"]}))
