"""benchmarks/reliability/large_corpus.py on a small corpus: the generated file has the promised lines, and the scan and rank
phases (what the 100M-line benchmark runs in subprocesses) report a full scan and an exact resume."""

from __future__ import annotations

import pytest

from benchmarks.reliability.large_corpus import SKIP_EVERY, generate, phase_rank, phase_scan

pytestmark = pytest.mark.slow  # imports lightning + transformers (the benchmark's train phase): ~20 s on 2 busy cores


def test_generated_corpus_scans_and_resumes(tmp_path):
    corpus, lines = tmp_path / "corpus.txt", 3 * SKIP_EVERY + 5
    generate(corpus, lines, block=7_000)
    text = corpus.read_text().split("\n")
    assert len(text) == lines + 1 and text[-1] == "" and text[SKIP_EVERY - 1] == ""
    assert all(3 <= len(line.split()) <= 7 for i, line in enumerate(text[:-1]) if (i + 1) % SKIP_EVERY)
    scan = phase_scan(corpus, tmp_path / "cache", lines)
    assert scan["usable"] == lines - 3 and scan["skipped"] == {"empty": 3}
    assert phase_rank(corpus, tmp_path / "cache", skip=50, check=100)["resumed_equals_uninterrupted"]
