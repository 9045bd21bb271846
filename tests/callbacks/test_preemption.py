"""The pieces of a stop between optimizer steps (issue 38); real signals to real runs are in tests/runs/test_stopping.py."""

from __future__ import annotations

from pathlib import Path

from sts_lightning.callbacks.preemption import mark_mid_evaluation, resume_line


def test_a_checkpoint_written_inside_a_validation_says_its_last_batch_was_not_finished():
    done = {"ready": 1, "started": 1, "processed": 1, "completed": 1}
    checkpoint = {"loops": {"fit_loop": {"epoch_loop.val_loop.batch_progress": {
        "total": {"ready": 3, "started": 3, "processed": 3, "completed": 3}, "current": dict(done),
        "is_last_batch": True}}}}
    mark_mid_evaluation(checkpoint)
    progress = checkpoint["loops"]["fit_loop"]["epoch_loop.val_loop.batch_progress"]
    # what Lightning's _EvaluationLoop.update_restart_stage reads as "restarted mid-evaluation": run it again
    assert progress["total"] == {"ready": 3, "started": 3, "processed": 2, "completed": 2}
    assert progress["current"] == {"ready": 1, "started": 1, "processed": 0, "completed": 0}
    untouched = {"loops": {"fit_loop": {}}}
    mark_mid_evaluation(untouched)
    assert untouched == {"loops": {"fit_loop": {}}}


def test_the_resume_line_names_ckpt_path_last_unless_the_run_began_from_another_checkpoint_and_saved_none():
    run = Path("/runs/a")
    last = "continue with the same command plus hydra.run.dir=/runs/a ckpt_path=last (exit code 75)"
    assert resume_line(run, None, None) == last  # nothing saved yet: ckpt_path=last starts it again
    assert resume_line(run, "/runs/a/checkpoints/last.ckpt", "/old/best.ckpt") == last
    assert resume_line(run, None, "last") == last
    assert resume_line(run, None, "/old/best.ckpt") == ("start it again with the same command plus "
                                                         "hydra.run.dir=/runs/a (exit code 75)")
