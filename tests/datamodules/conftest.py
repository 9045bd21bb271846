"""Fixtures for the datamodule tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture()
def sentence_file(tmp_path) -> Path:
    """A 40-line sentence file with empty, blank and one undecodable line (the index skips and counts them)."""
    lines = [f"sentence number {i} here" for i in range(40)]
    lines[3], lines[10], lines[20] = "", "   \t ", ""
    raw = "\n".join(lines).encode() + b"\n\xff\xfe broken\n"
    path = tmp_path / "data" / "wiki" / "s.txt"
    path.parent.mkdir(parents=True)
    path.write_bytes(raw)
    return path
