"""benchmarks/encode_speed.py end to end on the tiny model: it prints the ratio line docs/speed.md quotes."""

from __future__ import annotations

import re

from tests.helpers import run_main


def test_encode_speed_prints_the_bf16_ratio_and_spearman(monkeypatch, capsys, tiny_model_dir, tiny_data_dir):
    from benchmarks import encode_speed
    from sts_lightning.embeddings.encoders import precision

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)
    lines = run_main(encode_speed, ["--model", str(tiny_model_dir), "--data-dir", str(tiny_data_dir), "--precision",
                                "bf16", "--repeats", "1", "--batch-size", "8"], monkeypatch, capsys)
    assert re.fullmatch(r"ratio_vs_sentence_transformers_fp32 \d+\.\d\d", lines[-1]), lines[-1]
    assert re.match(r"stsb-dev Spearman x100: ours bf16 -?\d+\.\d+, sentence-transformers fp32", lines[-2]), lines[-2]
