"""The speed benchmarks run end to end on the tiny model and print their ratio lines (docs/speed.md quotes them)."""

from __future__ import annotations

import re
import sys

import pytest


def _run(module, argv, monkeypatch, capsys) -> list[str]:
    monkeypatch.setattr(sys, "argv", [module.__name__, *argv])
    module.main()
    return capsys.readouterr().out.strip().splitlines()


def test_encode_speed_prints_the_bf16_ratio_and_spearman(monkeypatch, capsys, tiny_model_dir, tiny_data_dir):
    from benchmarks import encode_speed
    from sts_lightning.embeddings.encoders import precision

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)
    lines = _run(encode_speed, ["--model", str(tiny_model_dir), "--data-dir", str(tiny_data_dir), "--precision",
                                "bf16", "--repeats", "1", "--batch-size", "8"], monkeypatch, capsys)
    assert re.fullmatch(r"ratio_vs_sentence_transformers_fp32 \d+\.\d\d", lines[-1]), lines[-1]
    assert re.match(r"stsb-dev Spearman x100: ours bf16 -?\d+\.\d+, sentence-transformers fp32", lines[-2]), lines[-2]


@pytest.mark.parametrize("precision", ["32", "bf16-mixed"])
def test_train_speed_prints_both_methods(precision, monkeypatch, capsys, tiny_model_dir, train_data_dir):
    from benchmarks import train_speed

    lines = _run(train_speed, ["--model", str(tiny_model_dir), "--data-dir", str(train_data_dir), "--steps", "2",
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

    lines = _run(train_speed, ["--model", str(tiny_model_dir), "--data-dir", str(train_data_dir), "--steps", "2",
                               "--warmup", "1", "--batch-size", "4", "--methods", "simcse", "--simcse-data", data],
                 monkeypatch, capsys)
    assert re.fullmatch(r"ratio_fp32_vs_sentence_transformers_fp32 simcse \d+\.\d\d", lines[-1]), lines[-1]
