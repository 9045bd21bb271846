"""The line index of a sentence file, written once to the cache as ``.npy`` and opened memory-mapped.

A 100M-line corpus has 1.6 GB of spans; memory-mapped, ranks and workers share the page cache. The scan appends
its spans straight to the file (the ``.npy`` header written first with room for any length, rewritten at the end).
A ``.json`` sidecar (after the array) holds the skip statistics and line count; a mismatch is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import numpy as np
from numpy.lib import format as npy

from sts_lightning.datamodules.line_scan import scan_file, scan_into
from sts_lightning.embeddings.io.atomic import atomic_files

log = logging.getLogger(__name__)


NPY_HEADER_BYTES = 128  # numpy's 1.0 header, padded to 64-byte alignment: the room left for any row count


def _header(fh, rows: int) -> int:
    npy.write_array_header_1_0(fh, {"descr": "<i8", "fortran_order": False, "shape": (rows, 2)})
    return fh.tell()


def _estimate_index_bytes(path: Path, rows: int, covered: int, header: int) -> int:
    """The whole index's size (16 bytes a usable line), extrapolated from what was scanned, for a full disk's message."""
    size = path.stat().st_size
    if rows == 0 or covered == 0:
        with path.open("rb") as fh:
            head = fh.read(1 << 20)
        rows, covered = head.count(b"\n") + (not head.endswith(b"\n")), max(len(head), 1)
    return header + 16 * int(rows * size / covered)


def write_index(path: Path, target: Path, min_words: int, max_words: int | None) -> tuple[int, dict]:
    """Scan ``path`` into the ``.npy`` file ``target``, chunk by chunk: (usable lines, skip statistics)."""
    rows = covered = 0
    try:
        with target.open("wb") as fh:
            start = _header(fh, 0)

            def append(spans: np.ndarray) -> None:
                nonlocal rows, covered
                fh.write(np.ascontiguousarray(spans, dtype="<i8").data)
                fh.flush()  # a full disk fails here, inside the scan, not later in close()
                rows, covered = rows + len(spans), int(spans[-1, 1]) if len(spans) else covered

            stats = scan_into(path, append, min_words, max_words)
            fh.seek(0)
            if _header(fh, rows) != start:  # numpy leaves room for 21 digits: cannot happen, never write garbage
                raise RuntimeError(f"{target}: .npy header changed length")
    except OSError as err:
        err.needed = _estimate_index_bytes(path, rows, covered, NPY_HEADER_BYTES)
        raise
    return rows, stats


def read_index(cached: Path, meta: Path) -> tuple[np.ndarray, dict] | None:
    """A line-index cache, memory-mapped, or ``None`` (with a warning) when damaged; object arrays are refused."""
    try:
        info = json.loads(meta.read_text())
        rows, stats = int(info["rows"]), info["stats"]
        spans = np.load(cached, mmap_mode="r" if rows else None, allow_pickle=False)
        if not isinstance(spans, np.ndarray) or spans.dtype != np.int64 or spans.shape != (rows, 2):
            raise ValueError(f"spans {getattr(spans, 'dtype', type(spans).__name__)} "
                             f"{getattr(spans, 'shape', '')}, expected ({rows}, 2) int64")
        if not isinstance(stats, dict) or (rows and spans[-1, 1] > info["source_bytes"]):
            raise ValueError("statistics or spans do not match the source file")
        return spans, stats
    except Exception as err:  # noqa: BLE001 -- any unreadable cache is rebuilt, whatever broke it
        log.warning("%s: damaged line-index cache (%s: %s); rebuilding it", cached, type(err).__name__, err)
        return None


def load_spans(path: Path, cache_dir: Path | None, min_words: int = 1,
               max_words: int | None = None) -> tuple[np.ndarray, dict]:
    """The usable lines' byte spans of ``path`` and skip statistics, cached by file and word filters."""
    if cache_dir is None or not path.is_file():
        return scan_file(path, min_words, max_words)  # raises the clear "file not found" for a missing file
    st = path.stat()
    key = hashlib.sha1(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{min_words}|{max_words}".encode())
    cached = Path(cache_dir) / "sentence-index" / f"{path.name}.{key.hexdigest()[:16]}.npy"
    meta = cached.with_suffix(".json")
    if meta.is_file() and cached.is_file():
        found = read_index(cached, meta)
        if found is not None:
            return found
    with atomic_files(cached, meta) as (tmp, tmp_meta):  # a concurrent reader sees no file or a whole one
        rows, stats = write_index(path, tmp, min_words, max_words)
        tmp_meta.write_text(json.dumps({"rows": rows, "source_bytes": st.st_size, "stats": stats}))
    found = read_index(cached, meta)
    if found is None:
        raise OSError(f"{cached}: the line index just written cannot be read back")
    return found
