"""benchmarks/speed/encode_engine.py end to end on the tiny model: every setting runs and the packed rows equal the
padded reference to rounding."""

from __future__ import annotations

import re

from tests.helpers import run_main
from tests.tolerance import TINY_BERT


def test_encode_engine_table_and_best_line(monkeypatch, capsys, tiny_model_dir, tiny_data_dir):
    from benchmarks.speed import encode_engine

    lines = run_main(encode_engine, ["--model", str(tiny_model_dir), "--data-dir", str(tiny_data_dir), "--repeats", "1",
                                     "--budgets", "16", "64", "--reference-batch-size", "4"], monkeypatch, capsys)
    rows = [line.split("|")[1:-1] for line in lines if re.match(r"\| (padded|packed) \|", line)]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [
        ("padded", "4 sentences"), ("padded", "16"), ("packed", "16"), ("padded", "64"), ("packed", "64")]
    assert all(float(r[5]) <= TINY_BERT["atol"] for r in rows), rows
    assert re.fullmatch(r"best (padded|packed) max_tokens (None|\d+) \d+\.\d", lines[-1]), lines[-1]


def test_attention_candidates_all_timed_on_a_tiny_batch():
    from benchmarks.speed.encode_engine import attention_candidates, budget_batch

    ids = [[1] * n for n in (7, 3, 5, 2, 6, 4)]
    batch = budget_batch(ids, 16)
    assert sum(map(len, batch)) <= 16 and batch
    timed = attention_candidates(batch, heads=2, dim=4, repeats=1)
    assert isinstance(timed["gathered SDPA (chosen)"], float)
    assert isinstance(timed["dense block-diagonal mask"], float)
