"""``train(cfg)`` on a mixture of two triplet files (``data.mixture``, ``datamodules.mixture``), end to end."""

from __future__ import annotations

import logging
import math

from tests.helpers import WORDS, compose_train_config


def _triplet_file(path, seed: int, rows: int = 12) -> str:
    """``rows`` anchor / positive / negative lines of the tiny BERT's words (anchors repeat: duplicates to defer)."""
    def sentence(i: int, k: int) -> str:
        return " ".join(WORDS[(seed * 7 + i * k + j) % len(WORDS)] for j in range(5))

    lines = [f"{sentence(i % 5, 3)}\t{sentence(i, 5)}\t{sentence(i, 11)}" for i in range(rows)]
    path.write_text("anchor\tpositive\tnegative\n" + "\n".join(lines) + "\n")
    return str(path)


def test_mnrl_trains_three_steps_on_a_round_robin_of_two_triplet_files(tmp_path, tiny_model_dir, train_data_dir,
                                                                         caplog):
    from sts_lightning.runs.train_run import train

    files = [_triplet_file(tmp_path / "a.tsv", 1), _triplet_file(tmp_path / "b.tsv", 2, rows=9)]
    cfg = compose_train_config(tmp_path / "run", tiny_model_dir, train_data_dir,
                               ["model=sbert_nli", "model.objective=mnrl", "data.format=triplets",
                                f"data.sources=[{','.join(files)}]", "data.mixture=round_robin",
                                "data.no_duplicates=true", "trainer.max_steps=3", "~callbacks.sts_evaluation",
                                "~callbacks.model_checkpoint", "export=false"])
    with caplog.at_level(logging.INFO):
        metrics = train(cfg)
    assert "stopped by trainer.max_steps=3" in caplog.text
    line = next(r.message for r in caplog.records if r.message.startswith("training batches"))
    assert "data.mixture=round_robin" in line and "a.tsv 12 rows 50.0% of batches" in line
    assert math.isfinite(metrics["train/loss"])
