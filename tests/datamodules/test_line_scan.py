"""The vectorised first scan (datamodules.line_scan) against the Python loop it replaced, line for line.

The reference below is the old ``scan_file`` body: its spans, skip reasons, counts, ``file:line`` examples and
their order must come back unchanged from the numpy scan, whatever the chunk size (a chunk boundary inside a
multi-byte character or a CRLF must not matter).
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from sts_lightning.datamodules.line_scan import scan_file, scan_into

PIECES = [b"a", b"bc", b"word", b" ", b"\t", b"\r", b"\n", b"\r\n", b"\xef\xbb\xbf", b"\xff", b"\xc3\xa9",
          b"\xc2\xa0", b"\xc2\x85", b"\xe2\x80\xa8", b"\xe3\x80\x80", b"\xf0\x9f\x98\x80", b"\xed\xa0\x80",
          b"\x1c", b"\x0b", b"\x85", b"\xe2\x80"]


def loop_scan(path, min_words=1, max_words=None):
    """The per-line loop of the old ``scan_file`` (the semantics the numpy scan keeps)."""
    spans, skipped, where, offset = [], Counter(), {}, 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            body = raw.rstrip(b"\r\n")
            bom = 3 if lineno == 1 and body.startswith(b"\xef\xbb\xbf") else 0
            start, end = offset + bom, offset + len(body)
            offset += len(raw)
            try:
                words = len(body[bom:].decode("utf-8").split())
            except UnicodeDecodeError:
                reason = "not UTF-8"
            else:
                reason = ("empty" if words == 0 else "too few words" if words < min_words
                          else "too many words" if max_words is not None and words > max_words else "")
            if not reason:
                spans.append((start, end))
                continue
            skipped[reason] += 1
            if len(where.setdefault(reason, [])) < 5:
                where[reason].append(f"{path}:{lineno}")
    report = "; ".join(f"{r}: {n} ({', '.join(where[r])}{', ...' if n > 5 else ''})" for r, n in skipped.items())
    return spans, {"skipped": dict(skipped), "report": report}


@pytest.mark.parametrize("case", range(300))
def test_numpy_scan_equals_the_line_loop(case, tmp_path):
    rng = random.Random(case)
    raw = b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 80)))
    path = tmp_path / "f.txt"
    path.write_bytes(b"\xef\xbb\xbf" + raw if case % 5 == 0 else raw)
    min_words, max_words = rng.choice([1, 2, 3]), rng.choice([None, 1, 2, 4])
    spans, stats = loop_scan(path, min_words, max_words)
    parts: list[np.ndarray] = []
    got = scan_into(path, parts.append, min_words, max_words, chunk_bytes=rng.choice([1, 2, 5, 64, 1 << 20]))
    assert np.concatenate(parts or [np.empty((0, 2), np.int64)]).tolist() == [list(s) for s in spans]
    assert got == stats and list(got["skipped"]) == list(stats["skipped"])  # reasons in order of first sight


def test_many_skips_are_counted_and_five_shown(tmp_path):
    path = tmp_path / "s.txt"
    path.write_bytes(b"\xef\xbb\xbf\n" + b"one two\r\n" * 3 + b"\n" * 7 + b"\xff\n" + b"a b c d e\n" + b"tail")
    spans, stats = scan_file(path, min_words=2, max_words=4)
    assert stats == loop_scan(path, 2, 4)[1]
    assert stats["skipped"] == {"empty": 8, "not UTF-8": 1, "too many words": 1, "too few words": 1}
    assert stats["report"].startswith(f"empty: 8 ({path}:1, {path}:5, {path}:6, {path}:7, {path}:8, ...)")
    assert spans.dtype == np.int64 and spans.tolist() == [[4, 11], [13, 20], [22, 29]]
