"""The before-step-1 estimate multiplies speeds measured here, not assumed ones (issue 48: ~1m00s said, 3m05s taken);
an encoder that cannot be timed falls back on the compute count, and nothing here stops a run."""

from __future__ import annotations

import signal
import time
from types import SimpleNamespace

import pytest
import torch

from sts_lightning.embeddings import stop_request
from sts_lightning.embeddings.stop_request import StopRequested
from sts_lightning.runs import encode_speed, first_step
from sts_lightning.runs.encode_speed import measured_rates, rate_of, sample_sentences


class SleepySource:
    """``per_sentence`` seconds a sentence: a known speed to measure."""

    def __init__(self, per_sentence: float) -> None:
        self.per_sentence, self.calls = per_sentence, []

    def embed(self, sentences):
        self.calls.append(list(sentences))
        time.sleep(self.per_sentence * len(sentences))
        return torch.zeros(len(sentences), 4)


def _build(speeds: dict[str, float], built: dict):
    def build(name, batch_size=64, device="cpu"):
        if name not in speeds:
            raise OSError(f"{name}: no such model")
        built[name] = SleepySource(speeds[name])
        return built[name]
    return build


def test_made_up_sentences_are_distinct_and_of_the_mean_length():
    sentences = sample_sentences(16, 60.0)
    assert len(set(sentences)) == 16  # an encoder encodes a repeated sentence once: the timing would lie
    assert all(50 <= len(s) <= 75 for s in sentences)
    assert all(s.strip() for s in sample_sentences(3, 0.0))


def test_each_encoder_is_built_once_and_timed_per_sentence_length():
    built = {}
    work = [("teacher vectors", "slow", 4000, 120.0), ("STS scoring", "slow", 14000, 60.0),
            ("teacher vectors", "fast", 4000, 120.0), ("teacher vectors", "missing", 4000, 120.0)]
    rates = measured_rates(work, build=_build({"slow": 0.01, "fast": 0.001}, built))
    assert set(built) == {"slow", "fast"} and len(built["slow"].calls) == 5  # a warm-up, then 2 per length
    assert 0.01 <= rate_of(rates, "slow", 60.0) < 0.05 and 0.001 <= rate_of(rates, "fast", 120.0) < 0.03
    assert rate_of(rates, "missing", 120.0) is None  # left to the compute count


def test_the_estimate_uses_the_measured_speed_and_the_compute_count_only_for_what_was_not_timed(monkeypatch):
    built = {}
    monkeypatch.setattr(encode_speed, "build_source", _build({"teacher": 0.005}, built))
    datamodule = SimpleNamespace(pending_encodes=lambda: [("SED teacher vectors", "teacher", 2000, 100.0),
                                                          ("SED teacher vectors", "untimed", 2000, 100.0)])
    trainer = SimpleNamespace(callbacks=[], accelerator=SimpleNamespace())
    monkeypatch.setattr(first_step, "matmul_flops", lambda device="cpu": 1e11)
    seconds = first_step.first_step_estimate(datamodule, trainer, None)
    counted = first_step.encode_seconds("untimed", 2000, 100.0, 1e11)
    assert seconds - counted == pytest.approx(2000 * rate_of(measured_rates(
        [("x", "teacher", 1, 100.0)], build=_build({"teacher": 0.005}, {})), "teacher", 100.0), rel=0.5)
    assert 2000 * 0.005 <= seconds - counted < 2000 * 0.05


def test_a_stop_while_timing_ends_before_the_next_model_loads():
    built = {}
    stop_request.request(signal.SIGTERM)
    with pytest.raises(StopRequested, match="SIGTERM while timing fast for the before-step-1 estimate"):
        measured_rates([("x", "fast", 10, 50.0)], build=_build({"fast": 0.001}, built))
    assert not built
