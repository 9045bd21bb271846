"""Before step 1: the work and its estimated time are printed before the work, the measured time at step 1."""

from __future__ import annotations

import logging
import re

import pytest

from sts_lightning.runs.first_step import describe, encode_seconds, encoder_shape
from tests.helpers import compose_train_config


def test_the_estimate_line_names_each_phase_its_size_and_time():
    work = [("caching features", "all-MiniLM-L6-v2", 20000, 139.0), ("STS scoring", "all-MiniLM-L6-v2", 2910, 60.0)]
    assert describe(work, [100.0, 31.0]) == ("before step 1: caching features: 20,000 sentences through 1 encoder "
                                             "(~1m40s), STS scoring of 2,910 sentences (~0m31s): ~2m11s in all "
                                             "(estimated)")
    teachers = [("SED teacher vectors", m, 4000, 100.0) for m in ("a", "b", "c")]
    assert describe(teachers, [60.0] * 3).startswith("before step 1: SED teacher vectors: 4,000 sentences through "
                                                     "3 encoders (~3m00s): ~3m00s in all")
    assert describe([], []) == "before step 1: nothing to encode (caches valid, no STS scoring at start)"


def test_encoding_time_follows_the_encoder_size_and_the_sentence_length(tiny_model_dir):
    assert encoder_shape(str(tiny_model_dir)) == (2, 32)  # its config.json
    assert encoder_shape("paraphrase-MiniLM-L3-v2") == (3, 384) and encoder_shape("glove") is None
    l3 = encode_seconds("paraphrase-MiniLM-L3-v2", 1000, 80.0, 1e11)
    assert encode_seconds("all-MiniLM-L6-v2", 1000, 80.0, 1e11) == pytest.approx(2 * l3)
    assert encode_seconds("paraphrase-MiniLM-L3-v2", 2000, 80.0, 2e11) == pytest.approx(l3)
    assert encode_seconds("paraphrase-MiniLM-L3-v2", 1000, 164.0, 1e11) > 1.5 * l3  # longer sentences
    assert encode_seconds("glove", 10 ** 6, 80.0, 1e11) == 0.0


def test_a_run_prints_the_estimate_before_the_work_and_the_time_at_step_1(tmp_path, tiny_model_dir, train_data_dir,
                                                                          caplog):
    from sts_lightning.runs.train_run import train

    cfg = compose_train_config(tmp_path, tiny_model_dir, train_data_dir, [
        "trainer.max_steps=1", "callbacks.sts_evaluation.eval_at_start=true", "export=false"])
    with caplog.at_level(logging.INFO):
        train(cfg)
    lines = [r.getMessage() for r in caplog.records]
    estimate = next(i for i, line in enumerate(lines) if line.startswith("before step 1: "))
    # "launch" is this process's start: here the pytest process, which may be minutes or hours old
    clock = r"(?:\d+h\d\dm|\d+m\d\ds)"
    assert re.match(rf"before step 1: STS scoring of [\d,]+ sentences \(~{clock}\): ~{clock} in all \(estimated\)$",
                    lines[estimate])
    scoring = next(i for i, line in enumerate(lines) if line.startswith("scoring STS before training"))
    step1 = next(i for i, line in enumerate(lines) if line.startswith("step 1 starts "))
    assert estimate < scoring < step1
    assert re.match(rf"step 1 starts {clock} after launch \({clock} after the estimate of ~{clock}\)$", lines[step1])
