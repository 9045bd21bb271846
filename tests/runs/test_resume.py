"""Fault tolerance: a run killed mid-epoch and resumed from ``last.ckpt`` vs. one uninterrupted run.

Run A trains 2 epochs in one go. Run B is the same config, killed (an exception raised by a callback, as a
crash would) at the start of a batch in the middle of an epoch, after ``last.ckpt`` was written for the
step before (``every_n_train_steps=1``); B is then resumed with ``ckpt_path=last`` to the same end.
Compared: the step count, the final weights (every tensor of ``last.ckpt``'s state dict, max abs diff),
the final ``train/*`` metrics and ``val/stsb-dev_spearman``.

Also here, issue 18 items 6 and 10: what a killed-and-resumed run leaves in its logs, and the modes of what runs write.

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
import torch
from lightning.pytorch import Callback

from tests.helpers import compose_evaluate_config, compose_train_config

ATOL = 1e-6  # CPU, float32, single process: a faithful resume is bit-identical; 1e-6 allows for nothing else


class Killed(RuntimeError):
    """Stands in for the process dying (OOM kill, preemption): nothing runs after it."""


class KillAt(Callback):
    """Raise at the START of the batch that would be optimizer step ``step`` (its checkpoint exists)."""

    def __init__(self, step: int):
        self.step = int(step)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.step:
            raise Killed(f"killed before step {self.step} (epoch {trainer.current_epoch}, batch {batch_idx})")


SEEN: dict[str, dict[int, tuple]] = {}


class Record(Callback):
    """Per optimizer step: the batch's sentences and a fingerprint of the global torch RNG (dropout's)."""

    def __init__(self, run: str):
        self.run = run

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        text = tuple(batch.get("sentences") or batch.get("sentences1"))
        rng = hash(torch.get_rng_state().numpy().tobytes())
        SEEN.setdefault(self.run, {})[trainer.global_step] = (trainer.current_epoch, batch_idx, text, rng)


COMMON = ["trainer.max_epochs=2", "trainer.deterministic=true", "export=false",
          "callbacks.last_checkpoint.every_n_train_steps=1"]
# 14 NLI pairs (snli:dev 8 + sick:trial 6), batch 4 -> 4 steps an epoch, 8 in all.
NLI = ["data=nli"]
# 40 sentences, batch 8 -> 5 steps an epoch, 10 in all; CT draws its pairs from (seed, rank, step).
CT = ["model=ct", "data=sentences", "data.batch_size=8", "model.pairs=8", "model.positives=2"]


def _train(out: Path, model_dir: Path, data_dir: Path, overrides: list[str]) -> dict[str, float]:
    from sts_lightning.runs.train_run import train

    extra = [f"data.cache_dir={out.parent / 'cache'}"] if "data=sentences" in overrides else []
    return train(compose_train_config(out, model_dir, data_dir, [*COMMON, *overrides, *extra]))


def _state(out: Path) -> tuple[int, dict[str, torch.Tensor]]:
    ckpt = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu")
    return ckpt["global_step"], ckpt["state_dict"]


def _compare(tmp_path: Path, model_dir: Path, data_dir: Path, overrides: list[str], kill_step: int) -> dict:
    """Run A (uninterrupted) and B (killed before ``kill_step``, resumed); return what differs and by how much."""
    rec = [f"+callbacks.rec._target_={__name__}.Record"]
    a = _train(tmp_path / "a", model_dir, data_dir, [*overrides, *rec, f"+callbacks.rec.run={tmp_path}/a"])
    rec.append(f"+callbacks.rec.run={tmp_path}/b")
    kill = [f"+callbacks.kill._target_={__name__}.KillAt", f"+callbacks.kill.step={kill_step}"]
    with pytest.raises(Killed):
        _train(tmp_path / "b", model_dir, data_dir, [*overrides, *rec, *kill])
    killed_step, _ = _state(tmp_path / "b")
    b = _train(tmp_path / "b", model_dir, data_dir, [*overrides, *rec, "ckpt_path=last"])
    step_a, sd_a = _state(tmp_path / "a")
    step_b, sd_b = _state(tmp_path / "b")
    assert sd_a.keys() == sd_b.keys()
    weight_diff = max((sd_a[k].float() - sd_b[k].float()).abs().max().item() for k in sd_a)
    metric_diff = {k: abs(a[k] - b[k]) for k in sorted(a.keys() & b.keys()) if k.startswith(("train/", "val/"))}
    seen_a, seen_b = SEEN.pop(f"{tmp_path}/a"), SEEN.pop(f"{tmp_path}/b")
    other_batches = [s for s in seen_a if seen_a[s][:3] != seen_b.get(s, (None,) * 3)[:3]]
    other_rng = [s for s in seen_a if seen_a[s][3] != seen_b.get(s, (None,) * 4)[3]]
    return {"other_batches": other_batches, "other_rng": other_rng, "seen_a": seen_a, "seen_b": seen_b,
            "killed_step": killed_step, "steps": (step_a, step_b), "weights": weight_diff,
            "metrics": metric_diff, "only_a": sorted(a.keys() - b.keys()), "only_b": sorted(b.keys() - a.keys())}


@pytest.mark.parametrize(("overrides", "kill_step", "steps"), [
    pytest.param(NLI, 6, 8, id="nli-mid-epoch"),
    pytest.param(NLI, 4, 8, id="nli-epoch-boundary"),
    pytest.param(CT, 7, 10, id="ct-stream-mid-epoch"),
])
def test_resume_matches_uninterrupted(tmp_path, tiny_model_dir, train_data_dir, overrides, kill_step, steps):  # noqa: F811
    """Killed before optimizer step ``kill_step`` (NLI: 4 steps an epoch, CT: 5; step 4 is the first of
    NLI's second epoch, its checkpoint the end of the first), resumed: same weights and
    metrics as the uninterrupted run within ATOL (1e-6 absolute, CPU float32; a faithful resume is exact).
    """
    r = _compare(tmp_path, tiny_model_dir, train_data_dir, overrides, kill_step)
    summary = {k: v for k, v in r.items() if not k.startswith("seen")}
    print(summary)
    assert r["killed_step"] == kill_step and r["steps"] == (steps, steps)
    assert "val/stsb-dev_spearman" in r["metrics"]
    assert not r["other_batches"], summary
    assert r["weights"] <= ATOL, summary
    assert all(d <= ATOL for d in r["metrics"].values()), summary


# ------------------------------------------------ what a killed-and-resumed run leaves in its logs (issue 18)


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
    evaluate(compose_evaluate_config(tmp_path / "eval", [f"encoders=[{run / 'export'}]", "scorers=[mean]", "tasks=[stsb-dev]",
                                               f"paths.data_dir={tiny_data_dir}", "encoder.max_length=32"]))
    assert (tmp_path / "eval" / "out" / "results.png").is_file()
    assert _wrong_modes(run) + _wrong_modes(tmp_path / "eval" / "out") == []
