"""The first scan of a sentence file at bytes level: numpy over an mmap, a few MiB at a time.

Each chunk (cut at a newline) is decoded once with ``surrogateescape`` and re-encoded as UTF-32; word counts are
``cumsum`` differences of word starts. The same spans, skip reasons and reports as a line loop (a trailing ``\\r``
and a BOM on line 1 left out), without a Python loop per line. Spans go to a ``sink`` chunk by chunk.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from pathlib import Path

import numpy as np

from sts_lightning.embeddings.io.input_file import require_file
from sts_lightning.embeddings.stop_request import check_stop

SHOW_LINES = 5
CHUNK_BYTES = 8 << 20
BOM = b"\xef\xbb\xbf"
REASONS = ("", "not UTF-8", "empty", "too few words", "too many words")  # code 0 = usable
_LAST_SPACE = 0x3000  # the highest code point with str.isspace() (IDEOGRAPHIC SPACE)
WHITESPACE = np.array([chr(c).isspace() for c in range(_LAST_SPACE + 1)] + [False])


def _chunk_end(mm: mmap.mmap, pos: int, size: int, chunk: int) -> int:
    """Where the chunk from ``pos`` ends: just after a newline (a long line makes a long chunk), or EOF."""
    end = min(pos + chunk, size)
    if end == size:
        return end
    nl = mm.rfind(b"\n", pos, end)
    if nl < 0:
        nl = mm.find(b"\n", end)
    return size if nl < 0 else nl + 1


def _release(mm: mmap.mmap, start: int, end: int) -> int:
    """Drop pages ``[start, end)`` from this mapping (not the page cache): a read file leaves the RSS."""
    stop = end - end % mmap.PAGESIZE
    if hasattr(mmap, "MADV_DONTNEED") and stop > start:
        mm.madvise(mmap.MADV_DONTNEED, start, stop - start)
        return stop
    return start


def _line_bounds(newlines: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """[start, end) of each line of a chunk from its newline positions (a last line without one included)."""
    starts = np.concatenate(([0], newlines + 1))
    ends = newlines
    if starts[-1] < length:
        ends = np.concatenate((newlines, [length]))
    else:
        starts = starts[:-1]
    return starts, ends


def _per_line(hits: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    """How many of the sorted positions ``hits`` fall in each line (lines tile the chunk from ``starts``)."""
    return np.diff(np.searchsorted(hits, np.append(starts, length)))


def _reasons(buf: np.ndarray, chunk: bytes | None, min_words: int, max_words: int | None, bom: bool) -> np.ndarray:
    """Skip-reason code of every line of a chunk (indexes into ``REASONS``; 0 = usable); ASCII chunks on bytes."""
    if chunk is None:
        cp, bad = buf, np.empty(0, np.int64)
    else:
        cp = np.frombuffer(chunk.decode("utf-8", "surrogateescape").encode("utf-32-le", "surrogatepass"),
                           dtype=np.uint32)
        if bom:  # the file's BOM is no word (and stays a character, so a BOM-only line is still a line)
            cp = cp.copy()
            cp[0] = ord(" ")
        bad = np.flatnonzero((cp >= 0xDC80) & (cp <= 0xDCFF))
    starts, _ = _line_bounds(np.flatnonzero(cp == 10), len(cp))
    if cp.dtype == np.uint8:  # ASCII whitespace: \t\n\v\f\r, \x1c-\x1f, space (3x faster than the table)
        space = (cp == 32) | ((cp - 9) <= 4) | ((cp - 28) <= 3)
    else:
        space = WHITESPACE[np.minimum(cp, _LAST_SPACE + 1)]
    word_start = ~space
    word_start[1:] &= space[:-1]
    words = _per_line(np.flatnonzero(word_start), starts, len(cp))
    too_many = words > max_words if max_words is not None else np.zeros(len(words), bool)
    return np.select([_per_line(bad, starts, len(cp)) > 0, words == 0, words < min_words, too_many], [1, 2, 3, 4], 0)


def scan_into(path: Path, sink: Callable[[np.ndarray], None], min_words: int = 1, max_words: int | None = None,
              chunk_bytes: int = CHUNK_BYTES) -> dict:
    """Feed the ``[start, end)`` byte spans of the usable lines of ``path`` to ``sink`` (``(k, 2)`` int64
    arrays, in file order); return ``{"skipped": reason -> count, "report": "...file:line..."}``."""
    require_file(path)
    counts: dict[int, int] = {}
    where: dict[int, list[int]] = {}
    size, lineno = path.stat().st_size, 1
    if size == 0:
        return _stats(path, counts, where)
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        pos = released = 0
        buf = None
        try:
            while pos < size:
                check_stop("indexing sentences")  # a SIGTERM: the index is not cached (its writer is atomic)
                end = _chunk_end(mm, pos, size, chunk_bytes)
                buf = np.frombuffer(mm, dtype=np.uint8, count=end - pos, offset=pos)
                starts, ends = _line_bounds(np.flatnonzero(buf == 10), end - pos)
                bom = 3 if pos == 0 and mm[:3] == BOM else 0
                while True:  # rstrip(b"\r\n"): the newline is not in [start, end); trailing \r's go too
                    cr = (ends > starts) & (buf[np.maximum(ends - 1, 0)] == 13)
                    if not cr.any():
                        break
                    ends = ends - cr
                text = mm[pos:end] if bom or (buf >= 0x80).any() else None  # None: ASCII, counted on the bytes
                reason = _reasons(buf, text, min_words, max_words, bool(bom))
                starts[:1] += bom  # line 1 of a file that starts with a BOM (the BOM is never a line's end)
                for code in np.unique(reason[reason > 0]).tolist():
                    hits = np.flatnonzero(reason == code)
                    counts[code] = counts.get(code, 0) + len(hits)
                    shown = where.setdefault(code, [])
                    shown += (lineno + hits[:SHOW_LINES - len(shown)]).tolist()
                keep = reason == 0
                sink(np.stack((starts[keep] + pos, ends[keep] + pos), axis=1).astype(np.int64))
                lineno += len(starts)
                released = _release(mm, released, end)
                pos = end
        finally:  # also when the sink raises (a full disk): the mmap cannot close while an array still views it,
            del buf  # and a BufferError from its close would replace the sink's error
    return _stats(path, counts, where)


def _stats(path: Path, counts: dict[int, int], where: dict[int, list[int]]) -> dict:
    """The skip counts and the report, reasons in the order they first occur in the file."""
    order = sorted(counts, key=lambda code: where[code][0])
    report = "; ".join(f"{REASONS[c]}: {counts[c]} ({', '.join(f'{path}:{n}' for n in where[c])}"
                       f"{', ...' if counts[c] > SHOW_LINES else ''})" for c in order)
    return {"skipped": {REASONS[c]: counts[c] for c in order}, "report": report}


def scan_file(path: Path, min_words: int = 1, max_words: int | None = None) -> tuple[np.ndarray, dict]:
    """Byte spans ``[start, end)`` of the usable lines of ``path`` (in memory) and what was skipped."""
    parts: list[np.ndarray] = [np.empty((0, 2), np.int64)]
    stats = scan_into(Path(path), parts.append, min_words, max_words)
    return np.concatenate(parts), stats
