"""benchmarks/speed/train_speed.py end to end on the tiny model: like-for-like ratio lines, tokens/s, MFU, every method."""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers import run_main

COMMON = ["--steps", "2", "--warmup", "1", "--batch-size", "4", "--ct-max-length", "16", "--nli-max-length", "16",
          "--mlm-max-length", "16"]


@pytest.mark.parametrize("precision", ["32", "bf16-mixed"])
def test_train_speed_prints_both_methods(precision, monkeypatch, capsys, tiny_model_dir, train_data_dir):
    from benchmarks.speed import train_speed

    lines = run_main(train_speed, ["--model", str(tiny_model_dir), "--data-dir", str(train_data_dir), *COMMON,
                                   "--precision", precision], monkeypatch, capsys)
    tag = "bf16" if precision == "bf16-mixed" else "fp32"
    assert [line.split()[:2] for line in lines[-2:]] == [[f"ratio_{tag}_vs_sentence_transformers_{tag}", "ct"],
                                                        [f"ratio_{tag}_vs_sentence_transformers_{tag}", "nli"]]
    if precision == "bf16-mixed":
        assert any("ours fp32" in line and "difference" in line for line in lines)


def test_every_method_against_a_bf16_peer_records_its_figures(monkeypatch, capsys, tiny_model_dir, train_data_dir,
                                                              tmp_path):
    from benchmarks.speed import train_speed

    records = tmp_path / "train.jsonl"
    lines = run_main(train_speed, ["--model", str(tiny_model_dir), "--data-dir", str(train_data_dir), *COMMON,
                                   "--methods", "mnrl,cosent,mlm", "--nli-source", "snli:test", "--precision", "bf16-mixed", "--fp32-reference",
                                   "none", "--meter-steps", "1", "--json", str(records)], monkeypatch, capsys)
    assert [line.split()[:2] for line in lines[-3:]] == [["ratio_bf16_vs_sentence_transformers_bf16", m]
                                                        for m in ("mnrl", "cosent", "mlm")]
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert [r["method"] for r in rows] == ["mnrl", "cosent", "mlm"]
    for r in rows:
        assert r["peer_precision"] == "bf16-mixed" and r["tokens_per_step"] > 0 and r["mfu_ours"] > 0
        assert r["idle_ours"] is None and r["mem_ours_mib"] is not None  # a CPU: no idle fraction, RSS growth
        assert set(r["phases_ms"]) == {"ours", "theirs"}


@pytest.mark.parametrize("data", ["wiki", "nli"])
def test_train_speed_prints_the_simcse_ratio(data, monkeypatch, capsys, tiny_model_dir, train_data_dir):
    from benchmarks.speed import train_speed

    lines = run_main(train_speed, ["--model", str(tiny_model_dir), "--data-dir", str(train_data_dir), "--steps", "2",
                                   "--warmup", "1", "--batch-size", "4", "--methods", "simcse", "--simcse-data", data,
                                   "--peer-precision", "32"], monkeypatch, capsys)
    assert re.fullmatch(r"ratio_fp32_vs_sentence_transformers_fp32 simcse \d+\.\d\d", lines[-1]), lines[-1]
