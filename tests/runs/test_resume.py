"""Fault tolerance: a run killed mid-epoch and resumed from ``last.ckpt`` vs. one uninterrupted run.

Run A trains 2 epochs in one go. Run B is the same config, killed (an exception raised by a callback, as a
crash would) at the start of a batch in the middle of an epoch, after ``last.ckpt`` was written for the
step before (``every_n_train_steps=1``); B is then resumed with ``ckpt_path=last`` to the same end.
Compared: the step count, the final weights (every tensor of ``last.ckpt``'s state dict, max abs diff),
the final ``train/*`` metrics and ``val/stsb-dev_spearman``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from lightning.pytorch import Callback

from tests.runs.test_train import _cfg

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
    return train(_cfg(out, model_dir, data_dir, [*COMMON, *overrides, *extra]))


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
