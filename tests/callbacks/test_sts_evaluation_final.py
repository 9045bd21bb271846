"""Every fit ends scored, whatever stopped it, and a missing mandatory value is one line naming the key."""

from __future__ import annotations

import csv

import pytest
from omegaconf import open_dict

from sts_lightning.embeddings.errors import run_or_exit
from tests.helpers import compose_train_config

BASE = ["model=sbert_nli", "callbacks.sts_evaluation.tasks=[stsb-dev]"]


def _fit(run, model_dir, data_dir, overrides) -> tuple[dict[str, float], list[int]]:
    """Train sbert_nli on the tiny data; the returned metrics and the csv steps that hold an STS score."""
    from sts_lightning.runs.train_run import train

    metrics = train(compose_train_config(run, model_dir, data_dir, [*BASE, *overrides, "export=false"]))
    with open(run / "csv" / "metrics.csv") as f:
        return metrics, [int(row["step"]) for row in csv.DictReader(f) if row.get("val/stsb-dev_spearman")]


def test_last_epoch_is_scored_when_the_validation_interval_skips_it(tmp_path, tiny_model_dir, train_data_dir,  # noqa: F811
                                                                    one_thread):
    run = tmp_path / "run"
    metrics, steps = _fit(run, tiny_model_dir, train_data_dir, ["trainer.max_epochs=3", "+trainer.check_val_every_n_epoch=2"])
    # 4 batches an epoch: before training, after epoch 2 (every 2nd epoch), and after epoch 3, which the
    # interval alone would skip (the csv logs the validation at the step index of the epoch's last batch)
    assert "val/stsb-dev_spearman" in metrics and steps == [0, 7, 11]
    assert list(run.glob("checkpoints/best-step*.ckpt"))


def test_without_a_validation_loop_the_final_weights_are_still_scored(tmp_path, tiny_model_dir, train_data_dir,  # noqa: F811
                                                                      one_thread):
    run = tmp_path / "run"
    metrics, steps = _fit(run, tiny_model_dir, train_data_dir, ["trainer.max_steps=2", "+trainer.limit_val_batches=0"])
    assert "val/stsb-dev_spearman" in metrics
    assert (run / "sts_before_after.md").is_file() and 2 in steps


def test_missing_mandatory_value_is_one_line(tmp_path, tiny_model_dir, train_data_dir, capsys):  # noqa: F811
    from sts_lightning.runs.train_run import train

    cfg = compose_train_config(tmp_path, tiny_model_dir, train_data_dir, ["model=sed", f"data.cache_dir={tmp_path}"])
    with open_dict(cfg):
        cfg.data.teachers = "???"
    with pytest.raises(SystemExit) as exited:
        run_or_exit(train, cfg)
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: data.teachers must be set") and "data.teachers=" in err[0]
