"""benchmarks/speed/encode_speed.py end to end on the tiny model: like-for-like ratio lines, MFU, idle, memory, Spearman."""

from __future__ import annotations

import json
import re

from tests.helpers import run_main


def test_encode_speed_runs_the_peer_in_our_precision(monkeypatch, capsys, tiny_model_dir, tiny_data_dir, tmp_path):
    from benchmarks.speed import encode_speed
    from sts_lightning.embeddings.encoders import precision

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)
    records = tmp_path / "encode.jsonl"
    lines = run_main(encode_speed, ["--model", str(tiny_model_dir), "--data-dir", str(tiny_data_dir), "--precision",
                                    "bf16,fp32", "--repeats", "1", "--peer-batch-sizes", "2,8", "--extra-fp32-peer",
                                    "--json", str(records)], monkeypatch, capsys)
    assert re.fullmatch(r"ratio_vs_sentence_transformers_bf16 \d+\.\d\d", lines[-2]), lines[-2]
    assert re.fullmatch(r"ratio_vs_sentence_transformers_fp32 \d+\.\d\d", lines[-1]), lines[-1]
    text = "\n".join(lines)
    assert re.search(r"stsb-dev Spearman x100: ours bf16 -?\d+\.\d+, sentence-transformers bf16", text), text
    assert re.search(r"MFU \(useful FLOPs over the real tokens / bf16 1024\^3 torch.mm peak .*\): ours \d", text)
    assert "device idle fraction (GPU waiting for the host): ours n/a, sentence-transformers n/a" in text
    assert "extra, not like for like: ours bf16 vs sentence-transformers fp32:" in text
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert [(r["precision"], r["peer_precision"]) for r in rows] == [("bf16", "bf16"), ("fp32", "fp32")]
    assert rows[0]["st_batch"] in (2, 8) and set(rows[0]["st_batch_search_s"]) == {"2", "8"}
    assert rows[0]["tokens"] > rows[0]["sentences"] and rows[0]["mfu_ours"] > 0


def test_ours_kwargs_reach_the_encoder_and_bad_ones_say_so(monkeypatch, capsys, tiny_model_dir, tiny_data_dir):
    import pytest

    from benchmarks.speed import encode_speed
    from sts_lightning.embeddings.errors import ConfigError

    lines = run_main(encode_speed, ["--model", str(tiny_model_dir), "--data-dir", str(tiny_data_dir), "--repeats", "1",
                                    "--peer-batch-sizes", "4", "--ours-kwargs", "batch_size=3",
                                    "--reference-kwargs", "batch_size=5"], monkeypatch, capsys)
    text = "\n".join(lines)
    assert "ours fp32 (batch 3 batch_size=3)" in text and "ours with --reference-kwargs 'batch_size=5'" in text
    with pytest.raises(ConfigError, match="no_such_option"):
        run_main(encode_speed, ["--model", str(tiny_model_dir), "--data-dir", str(tiny_data_dir), "--ours-kwargs",
                                "no_such_option=1"], monkeypatch, capsys)


def test_the_peer_runs_in_the_precision_asked_and_no_other(tiny_model_dir):
    import torch

    from benchmarks.speed.encode_speed import load_peer

    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        st = load_peer(str(tiny_model_dir), torch.device("cpu"), precision, 16)
        assert {p.dtype for p in st.parameters()} == {dtype}, precision
