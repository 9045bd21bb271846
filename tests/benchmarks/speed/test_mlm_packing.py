"""The MLM packing benchmark runs on a tiny file and finds packing pads less."""

from __future__ import annotations

from benchmarks.speed.mlm_packing import main
from tests.helpers import WORDS


def test_packing_benchmark_reports_less_padding_when_packed(tmp_path, one_thread):
    lines = [" ".join(WORDS[j % len(WORDS)] for j in range(i, i + 3 + i % 9)) for i in range(24)]
    (tmp_path / "s.txt").write_text("\n".join(lines) + "\n")
    result = main(["--data-dir", str(tmp_path), "--file", "s.txt", "--batch-size", "8", "--max-length", "32",
                   "--layers", "1", "--hidden", "32", "--heads", "2", "--steps", "1", "--warmup", "1"])
    assert result["pack=True"]["padding_share"] < result["pack=False"]["padding_share"]
    assert all(row["steps_per_s"] > 0 for row in result.values())
