"""Issue 18 items 6 and 10: what a killed-and-resumed run leaves in its logs, and the modes of what runs write.

Item 6: run A trains uninterrupted; run B is killed before an optimizer step (``KillAt``, after ``last.ckpt``
was written for the step before) and resumed with ``ckpt_path=last`` in the same directory. B's
``csv/metrics.csv`` must hold exactly A's rows: the pre-training STS row (step 0) and the killed attempt's
rows up to the checkpoint kept, the rows it logged after the checkpoint's step not doubled. The "hard" kill
also drops the rows the logger had not written yet, as a killed process would (an exception lets Lightning's
``finalize`` write them).

Item 10: under umask 022 what a run and evaluate.py write is 0755 / 0644, not private 0700 / 0600.
"""

from __future__ import annotations

import csv
import os
import stat
from pathlib import Path

import pytest

from tests.runs.test_evaluate import _cfg as _evaluate_cfg
from tests.runs.test_resume import NLI, KillAt, Killed, _train


class HardKillAt(KillAt):
    """``KillAt`` that first drops every logger's unwritten rows: what a SIGKILL leaves is what is on disk."""

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.step:
            for logger in trainer.loggers:
                getattr(logger.experiment, "metrics", []).clear()
        super().on_train_batch_start(trainer, pl_module, batch, batch_idx)


def _rows(out: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(out / "csv" / "metrics.csv", newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


@pytest.mark.parametrize(("kill", "kill_step"), [
    pytest.param(KillAt, 6, id="mid-epoch"),
    pytest.param(KillAt, 4, id="epoch-boundary"),
    pytest.param(HardKillAt, 6, id="hard-mid-epoch"),
])
def test_item6_csv_metrics_after_resume_match_uninterrupted(tmp_path, tiny_model_dir, train_data_dir, kill, kill_step):
    _train(tmp_path / "a", tiny_model_dir, train_data_dir, NLI)
    killer = [f"+callbacks.kill._target_={kill.__module__}.{kill.__qualname__}", f"+callbacks.kill.step={kill_step}"]
    with pytest.raises(Killed):
        _train(tmp_path / "b", tiny_model_dir, train_data_dir, [*NLI, *killer])
    _train(tmp_path / "b", tiny_model_dir, train_data_dir, [*NLI, "ckpt_path=last"])
    keys_a, rows_a = _rows(tmp_path / "a")
    keys_b, rows_b = _rows(tmp_path / "b")
    assert rows_a[0]["step"] == "0" and rows_a[0]["val/stsb-dev_spearman"]  # eval_at_start's row
    assert keys_b == keys_a
    assert rows_b == rows_a


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _wrong_modes(root: Path) -> list[str]:
    """Every directory under ``root`` (itself included) should be 0755 and every file 0644 under umask 022."""
    wrong = []
    for path in [root, *sorted(root.rglob("*"))]:
        want = 0o755 if path.is_dir() else 0o644
        mode = stat.S_IMODE(path.lstat().st_mode)
        if not path.is_symlink() and mode != want:
            wrong.append(f"{path.relative_to(root.parent)}: {mode:o}")
    return wrong


def test_item10_exports_and_reports_get_ordinary_modes(umask_022, tmp_path, tiny_model_dir, train_data_dir,
                                                       tiny_data_dir):
    """A training run (checkpoints, csv/, export/, sts_before_after.md) and evaluate.py's reports
    (results.json/.md/.png) on its export: under umask 022, no private 0700 directory or 0600 file."""
    from sts_lightning.runs.evaluate_run import evaluate

    run = tmp_path / "run"
    _train(run, tiny_model_dir, train_data_dir, [*NLI, "trainer.max_epochs=1", "export=true"])
    assert (run / "export" / "model.safetensors").is_file() and (run / "csv" / "metrics.csv").is_file()
    evaluate(_evaluate_cfg(tmp_path / "eval", [f"encoders=[{run / 'export'}]", "scorers=[mean]", "tasks=[stsb-dev]",
                                               f"paths.data_dir={tiny_data_dir}", "encoder.max_length=32"]))
    assert (tmp_path / "eval" / "out" / "results.png").is_file()
    assert _wrong_modes(run) + _wrong_modes(tmp_path / "eval" / "out") == []
