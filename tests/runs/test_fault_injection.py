"""Fault injection (issue 18): real kills at random steps, during checkpoint writing and during export; two runs at once.

Every faulty run is a separate process ended by ``os._exit(137)`` (``tests/runs/fault_driver.py``), as
``kill -9`` ends it: no cleanup runs. It is then resumed with ``ckpt_path=last`` in the same directory and
compared with one uninterrupted run of the same config (also a process of its own): the final weights,
the step, the STS score and the whole export (every file's SHA-256 in its manifest) must be identical,
and no temporary file may be left anywhere in the run directory.

The kill steps are drawn from a seeded RNG (``FAULT_SEED``, default 18; the drawn steps are in the test
ids) so a failure is reproducible; set ``FAULT_SEED`` to draw others.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from embeddings.io.atomic import ORPHAN
from embeddings.io.checkpoint_file import load_checkpoint
from embeddings.io.export_manifest import MANIFEST_FILE, verify_export

ROOT = Path(__file__).resolve().parents[2]
KILLED = 137
# 14 NLI pairs, batch 4 -> 4 steps an epoch, 8 in all; last.ckpt after every step; the export at the end.
OVERRIDES = ["trainer.max_epochs=2", "trainer.deterministic=true", "export=true",
             "callbacks.last_checkpoint.every_n_train_steps=1"]
SEED = int(os.environ.get("FAULT_SEED", "18"))
KILL_STEPS = sorted(random.Random(SEED).sample(range(1, 8), 2))


def _drive(out: Path, model_dir: Path, data_dir: Path, fault: str | None = None, resume: bool = False) -> int:
    spec = {"out": str(out), "model_dir": str(model_dir), "data_dir": str(data_dir), "fault": fault,
            "overrides": [*OVERRIDES, *(["ckpt_path=last"] if resume else [])]}
    proc = subprocess.run([sys.executable, "-m", "tests.runs.fault_driver", json.dumps(spec)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=600)
    if proc.returncode not in (0, KILLED):
        raise AssertionError(f"driver exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc.returncode


def _leftovers(out: Path) -> list[str]:
    """Temporary copies anywhere under ``out`` (ours, and any ``*.tmp`` another writer might leave)."""
    return [str(p.relative_to(out)) for p in out.rglob("*") if ORPHAN.match(p.name) or re.search(r"\.tmp\b", p.name)]


def _final(out: Path) -> dict:
    ckpt = load_checkpoint(out / "checkpoints" / "last.ckpt")
    manifest = json.loads((out / "export" / MANIFEST_FILE).read_text())["files"]
    metrics = json.loads((out / "driver_metrics.json").read_text())
    return {"step": ckpt["global_step"], "state": ckpt["state_dict"], "export": manifest,
            "sts": metrics["val/stsb-dev_spearman"]}


def _assert_identical(a: dict, b: dict) -> None:
    assert b["step"] == a["step"] == 8
    assert a["state"].keys() == b["state"].keys()
    differ = [k for k in a["state"] if not torch.equal(a["state"][k], b["state"][k])]
    assert not differ, f"weights differ after the resume: {differ[:5]}"
    assert b["export"] == a["export"], "the resumed run's export differs from the uninterrupted run's"
    assert b["sts"] == a["sts"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, tiny_model_dir, train_data_dir) -> dict:
    out = tmp_path_factory.mktemp("uninterrupted")
    assert _drive(out, tiny_model_dir, train_data_dir) == 0
    assert _leftovers(out) == []
    return _final(out)


@pytest.mark.parametrize("step", KILL_STEPS, ids=lambda s: f"seed{SEED}-step{s}")
def test_a_kill_at_a_random_step_resumes_bit_for_bit(step, uninterrupted, tmp_path, tiny_model_dir, train_data_dir):
    out = tmp_path / "run"
    assert _drive(out, tiny_model_dir, train_data_dir, fault=f"step:{step}") == KILLED
    assert load_checkpoint(out / "checkpoints" / "last.ckpt")["global_step"] == step  # nothing lost
    assert _drive(out, tiny_model_dir, train_data_dir, resume=True) == 0
    _assert_identical(uninterrupted, _final(out))
    assert _leftovers(out) == []


def test_a_kill_while_a_checkpoint_is_written_keeps_the_previous_one_and_resumes_bit_for_bit(
        uninterrupted, tmp_path, tiny_model_dir, train_data_dir):
    out = tmp_path / "run"
    assert _drive(out, tiny_model_dir, train_data_dir, fault="checkpoint:4") == KILLED
    assert len(_leftovers(out)) == 1  # the half-written copy, beside last.ckpt, never in its place
    before = load_checkpoint(out / "checkpoints" / "last.ckpt")  # complete and loadable: the 3rd save
    assert 0 < before["global_step"] < 8
    assert _drive(out, tiny_model_dir, train_data_dir, resume=True) == 0
    _assert_identical(uninterrupted, _final(out))
    assert _leftovers(out) == []  # the killed writer's copy was removed by the resume


def test_a_kill_during_export_leaves_no_export_and_the_resume_writes_the_same_one(
        uninterrupted, tmp_path, tiny_model_dir, train_data_dir):
    out = tmp_path / "run"
    assert _drive(out, tiny_model_dir, train_data_dir, fault="export") == KILLED
    assert not (out / "export").exists()  # never a half-written export in place
    assert [Path(p).name.startswith(".export.tmp-") for p in _leftovers(out)] == [True]
    assert _drive(out, tiny_model_dir, train_data_dir, resume=True) == 0  # training is done: only the export runs
    assert verify_export(out / "export") is True
    _assert_identical(uninterrupted, _final(out))
    assert _leftovers(out) == []
