"""A run says which budget stopped it, and warns before its first step when max_steps is out of reach."""

from __future__ import annotations

import logging

from sts_lightning.callbacks.step_budget import stop_reason, unreachable_steps_note
from tests.helpers import compose_train_config


def test_unreachable_max_steps_is_named_with_the_override_that_fixes_it():
    note = unreachable_steps_note(max_steps=20, max_epochs=1, per_epoch=13)
    assert "trainer.max_steps=20 will not be reached" in note and "at step 13" in note
    assert "trainer.max_epochs=-1" in note


def test_no_warning_when_steps_are_reachable_or_unbounded():
    assert unreachable_steps_note(20, 2, 13) is None       # 26 steps reachable
    assert unreachable_steps_note(-1, 1, 13) is None       # no step budget
    assert unreachable_steps_note(20, -1, 13) is None      # epochs unbounded
    assert unreachable_steps_note(20, 1, None) is None     # a stream of unknown length


def test_stop_reason_names_the_budget_that_ended_the_run():
    assert stop_reason(30, 1, 30, 300).endswith("stopped by trainer.max_steps=30")
    assert "(0.10 epochs)" in stop_reason(30, 1, 30, 300)
    by_epochs = stop_reason(20, 1, 13, 13)
    assert "stopped by trainer.max_epochs=1" in by_epochs and "max_steps=20 was not reached" in by_epochs
    assert "max_steps" not in stop_reason(-1, 2, 26, 13).split(":", 1)[1].replace("max_steps / max_epochs", "")
    assert "stopped before" in stop_reason(100, 5, 7, 13)


def test_training_run_warns_and_its_summary_says_max_epochs_stopped_it(tmp_path, tiny_model_dir, train_data_dir,
                                                                       caplog):
    from sts_lightning.runs.train_run import train

    cfg = compose_train_config(tmp_path, tiny_model_dir, train_data_dir,
               ["+trainer.limit_train_batches=2", "trainer.max_steps=5", "trainer.max_epochs=1",
                "~callbacks.sts_evaluation", "~callbacks.model_checkpoint", "export=false"])
    with caplog.at_level(logging.INFO):
        train(cfg)
    text = caplog.text
    assert "trainer.max_steps=5 will not be reached" in text and "at step 2" in text
    assert "2 optimizer steps (1.00 epochs): stopped by trainer.max_epochs=1; trainer.max_steps=5 was not reached" in text
