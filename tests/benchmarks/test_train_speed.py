"""benchmarks/train_speed.py end to end on the tiny model: it prints the ratio lines docs/speed.md quotes."""

from __future__ import annotations

import re

import pytest

from tests.helpers import run_main


@pytest.mark.parametrize("precision", ["32", "bf16-mixed"])
def test_train_speed_prints_both_methods(precision, monkeypatch, capsys, tiny_model_dir, train_data_dir):
    from benchmarks import train_speed

    lines = run_main(train_speed, ["--model", str(tiny_model_dir), "--data-dir", str(train_data_dir), "--steps", "2",
                               "--warmup", "1", "--batch-size", "4", "--ct-max-length", "16", "--nli-max-length", "16",
                               "--precision", precision], monkeypatch, capsys)
    tag = "bf16" if precision == "bf16-mixed" else "fp32"
    assert [line.split()[:2] for line in lines[-2:]] == [[f"ratio_{tag}_vs_sentence_transformers_fp32", "ct"],
                                                        [f"ratio_{tag}_vs_sentence_transformers_fp32", "nli"]]
    if precision == "bf16-mixed":
        assert any("ours fp32" in line and "difference" in line for line in lines)


@pytest.mark.parametrize("data", ["wiki", "nli"])
def test_train_speed_prints_the_simcse_ratio(data, monkeypatch, capsys, tiny_model_dir, train_data_dir):
    from benchmarks import train_speed

    lines = run_main(train_speed, ["--model", str(tiny_model_dir), "--data-dir", str(train_data_dir), "--steps", "2",
                               "--warmup", "1", "--batch-size", "4", "--methods", "simcse", "--simcse-data", data],
                 monkeypatch, capsys)
    assert re.fullmatch(r"ratio_fp32_vs_sentence_transformers_fp32 simcse \d+\.\d\d", lines[-1]), lines[-1]
