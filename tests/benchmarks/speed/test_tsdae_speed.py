"""benchmarks/speed/tsdae_speed.py end to end on the tiny model: a ratio line per batch size, the whole-head column."""

from __future__ import annotations

import re

from tests.helpers import run_main


def test_tsdae_speed_prints_a_ratio_per_batch_size(monkeypatch, capsys, tiny_model_dir, train_data_dir):
    from benchmarks.speed import tsdae_speed

    lines = run_main(tsdae_speed, ["--model", str(tiny_model_dir), "--data-dir", str(train_data_dir), "--steps", "1",
                                   "--warmup", "1", "--batch-sizes", "2,4", "--whole-head"], monkeypatch, capsys)
    assert any("ours, whole LM head steps/s" in line for line in lines)
    for line, batch in zip(lines[-2:], (2, 4), strict=True):
        assert re.fullmatch(rf"ratio_fp32_vs_sentence_transformers_fp32 tsdae_batch{batch} \d+\.\d\d", line), line
