"""``python evaluate.py`` as a user runs it (issue 27): a fitted export on another encoder, a scorer without
its required option, a task group with missing sets -- each is exit code 2 and ONE line on stderr."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sts_lightning.lightning_modules.flow import BertFlowModule
from tests.paths import ROOT


def _evaluate(tmp_path, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "evaluate.py", *overrides, f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"})


def _error_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


@pytest.fixture(scope="module")
def flow_export(tmp_path_factory, tiny_model_dir):
    return BertFlowModule(str(tiny_model_dir), max_length=32, depth=1, hidden=8).export(
        tmp_path_factory.mktemp("flow") / "export")


@pytest.mark.slow  # fits a flow export, then a `python evaluate.py` subprocess: 9-16 s
def test_flow_export_on_another_encoder_exits_2_with_one_line(tmp_path, flow_export, other_tiny_model_dir,
                                                               tiny_data_dir):
    result = _evaluate(tmp_path, f"encoders=[{other_tiny_model_dir}]", f"scorers=[{{name:flow,path:{flow_export}}}]",
                       f"paths.data_dir={tiny_data_dir}", "tasks=[stsb-dev]", "encoder.max_length=32")
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = _error_lines(result)
    assert str(flow_export / "flow_config.json") in line and "other weights" in line
    assert "Traceback" not in result.stderr


def test_scorer_without_its_path_exits_2_with_one_line(tmp_path, tiny_model_dir, tiny_data_dir):
    result = _evaluate(tmp_path, f"encoders=[{tiny_model_dir}]", "scorers=[flow]", f"paths.data_dir={tiny_data_dir}",
                       "tasks=[stsb-dev]")
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = _error_lines(result)
    assert "scorer 'flow' needs option path" in line and "Traceback" not in result.stderr


def test_a_group_with_missing_sets_exits_2_with_one_line(tmp_path, tiny_model_dir, tiny_data_dir):
    result = _evaluate(tmp_path, f"encoders=[{tiny_model_dir}]", f"paths.data_dir={tiny_data_dir}", "tasks=standard")
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = _error_lines(result)
    assert "task group 'standard': 5 of 7 sets are not in" in line and "stsb/sts-test.csv" in line
    assert len([x for x in result.stderr.splitlines() if x.strip()]) == 1  # nothing else: not even the tried paths
