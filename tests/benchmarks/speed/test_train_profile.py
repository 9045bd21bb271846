"""benchmarks/speed/train_profile.py on the tiny model: an op table and a summary row per precision and forward groups."""

from __future__ import annotations

import pytest

from tests.helpers import run_main


@pytest.mark.parametrize("method", ["nli", "ct"])
def test_train_profile_prints_a_row_per_setting(method, monkeypatch, capsys, tiny_model_dir, train_data_dir):
    from benchmarks.speed import train_profile

    monkeypatch.setitem(train_profile.MAX_LENGTH, method, 16)
    lines = run_main(train_profile, ["--method", method, "--model", str(tiny_model_dir), "--data-dir",
                                     str(train_data_dir), "--batch-size", "16", "--steps", "1", "--warmup", "1",
                                     "--profile-steps", "1", "--groups", "1,2", "--threads", "1"], monkeypatch, capsys)
    rows = [line for line in lines if line.startswith(("| 32 |", "| bf16-mixed |"))]
    assert [row.split("|")[1:3] for row in rows] == [[" 32 ", " 1 "], [" 32 ", " 2 "], [" bf16-mixed ", " 1 "],
                                                      [" bf16-mixed ", " 2 "]]
    assert sum("op table" in line for line in lines) == 4
    assert all("attention" in row for row in rows)  # which attention kernel ran is named
