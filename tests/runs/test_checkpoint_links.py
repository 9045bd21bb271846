"""Issue 48: a checkpoint saved twice at one step (best and ``last.ckpt``) is one file, and never written through.

Unit cases drive ``AtomicCheckpointIO`` as the two callbacks do (both orders, other weights, a rewrite of
``last.ckpt`` at the same step as a preemption stop does, the best name deleted for a better one); the run case
trains the tiny SBERT-NLI for one 2-batch epoch (best and last at step 2), resumes it for a second epoch and reads
the run directory's size in the summary.
"""

from __future__ import annotations

import torch

from sts_lightning.runs.checkpoint_io import AtomicCheckpointIO
from tests.helpers import compose_train_config


def _ckpt(step: int, value: float, extra: str = "") -> dict:
    return {"global_step": step, "state_dict": {"w": torch.full((64,), value)}, "loops": extra}


def _same_file(a, b) -> bool:
    return a.stat().st_ino == b.stat().st_ino


def test_best_after_last_of_its_step_is_a_link_to_it(tmp_path):
    io, last, best = AtomicCheckpointIO(), tmp_path / "last.ckpt", tmp_path / "best-step3.ckpt"
    io.save_checkpoint(_ckpt(3, 1.0, "before validation"), last)
    io.save_checkpoint(_ckpt(3, 1.0, "after validation"), best)
    assert _same_file(last, best) and last.stat().st_nlink == 2
    io.save_checkpoint(_ckpt(4, 2.0), last)  # the next step: a new file; the best keeps step 3
    assert not _same_file(last, best)
    assert torch.load(best, weights_only=True)["state_dict"]["w"][0] == 1.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best-step3.ckpt", "last.ckpt"]  # no temporary left


def test_last_after_best_of_its_step_is_written_and_the_best_points_at_it(tmp_path):
    io, last, best = AtomicCheckpointIO(), tmp_path / "last.ckpt", tmp_path / "best-step3.ckpt"
    io.save_checkpoint(_ckpt(3, 1.0, "validation end"), best)
    io.save_checkpoint(_ckpt(3, 1.0, "epoch end"), last)
    assert _same_file(last, best)
    assert torch.load(last, weights_only=True)["loops"] == "epoch end"  # the resume state is last.ckpt's own


def test_other_weights_at_the_same_step_are_two_files(tmp_path):
    """CT picks its kept copy during the validation: a buffer differs, so nothing is shared."""
    io, last, best = AtomicCheckpointIO(), tmp_path / "last.ckpt", tmp_path / "best-step3.ckpt"
    io.save_checkpoint(_ckpt(3, 1.0), last)
    io.save_checkpoint(_ckpt(3, 5.0), best)
    assert not _same_file(last, best)
    assert torch.load(best, weights_only=True)["state_dict"]["w"][0] == 5.0


def test_a_rewrite_of_last_never_writes_into_the_best_file(tmp_path):
    """A preemption stop rewrites ``last.ckpt`` at the step it was linked at: a new file, the best one untouched."""
    io, last, best = AtomicCheckpointIO(), tmp_path / "last.ckpt", tmp_path / "best-step3.ckpt"
    io.save_checkpoint(_ckpt(3, 1.0, "step end"), last)
    io.save_checkpoint(_ckpt(3, 1.0, "validation end"), best)
    before = best.read_bytes()
    io.save_checkpoint(_ckpt(3, 7.0, "mid-evaluation"), last)  # other content: must not reach the best name
    assert best.read_bytes() == before and not _same_file(last, best)
    assert torch.load(last, weights_only=True)["loops"] == "mid-evaluation"


def test_deleting_the_best_name_keeps_last(tmp_path):
    io, last, best = AtomicCheckpointIO(), tmp_path / "last.ckpt", tmp_path / "best-step3.ckpt"
    io.save_checkpoint(_ckpt(3, 1.0), last)
    io.save_checkpoint(_ckpt(3, 1.0), best)
    io.remove_checkpoint(best)  # what ModelCheckpoint does for a better one
    assert io.load_checkpoint(last)["global_step"] == 3


def test_without_hard_links_both_are_written(tmp_path, monkeypatch):
    import os

    def no_links(*_):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    io, last, best = AtomicCheckpointIO(), tmp_path / "last.ckpt", tmp_path / "best-step3.ckpt"
    io.save_checkpoint(_ckpt(3, 1.0), last)
    io.save_checkpoint(_ckpt(3, 1.0), best)
    assert not _same_file(last, best) and io.load_checkpoint(best)["global_step"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best-step3.ckpt", "last.ckpt"]


def test_a_run_keeps_one_copy_resumes_and_states_its_size(tmp_path, tiny_model_dir, train_data_dir, caplog):
    from sts_lightning.runs.train_run import train

    out = tmp_path / "run"
    train(compose_train_config(out, tiny_model_dir, train_data_dir, ["+trainer.limit_train_batches=2", "export=false"]))
    folder = out / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == ["best-step2.ckpt", "last.ckpt"]
    assert _same_file(folder / "best-step2.ckpt", folder / "last.ckpt")
    with caplog.at_level("INFO"):  # resumed in place, one more epoch
        train(compose_train_config(out, tiny_model_dir, train_data_dir, [
            "+trainer.limit_train_batches=2", "trainer.max_epochs=2", "ckpt_path=last", "export=false"]))
    assert torch.load(folder / "last.ckpt", weights_only=True)["global_step"] == 4
    names = sorted(p.name for p in folder.iterdir())
    assert all(n == "last.ckpt" or n.startswith("best-step") for n in names), names  # no temporary left
    if (folder / "best-step4.ckpt").exists():
        assert _same_file(folder / "best-step4.ckpt", folder / "last.ckpt")
    if (folder / "best-step2.ckpt").exists():  # kept (still the best): its own file again, its weights as at step 2
        assert not _same_file(folder / "best-step2.ckpt", folder / "last.ckpt")
        assert torch.load(folder / "best-step2.ckpt", weights_only=True)["global_step"] == 2
    assert "run directory: " in caplog.text
