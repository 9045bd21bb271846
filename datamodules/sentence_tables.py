"""Sentences from your own ``.tsv`` / ``.csv`` / ``.jsonl`` / ``.parquet`` files: one column written once into a text file.

Every sentence consumer reads one-sentence-a-line files by byte offset, so a table becomes one in the cache (keyed
by path, size, mtime, column and skip limit), as ``hub:`` sources do. Inner line breaks become spaces; empty rows are
skipped and counted (``malformed_rows``).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from sts_lightning.datamodules.malformed_rows import MalformedRows
from sts_lightning.datamodules.table_files import (
    BUILDERS,
    data_files,
    read_table,
    require_columns,
    resolve_path,
    text,
)
from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.io.atomic import atomic_write
from sts_lightning.embeddings.io.fingerprint import file_stat
from sts_lightning.embeddings.io.npy_cache import key_digest

log = logging.getLogger(__name__)


def sentence_file_paths(spec: str, data_dir: str | os.PathLike | None, cache_dir: Path,
                        columns: Mapping[str, str] | None = None, max_malformed_fraction: float = 0.01) -> list[Path]:
    """The one-sentence-a-line files of a local source: text files as they are, tables written out once."""
    paths = data_files(resolve_path(spec, data_dir), text_ok=True)
    return [table_text_file(p, cache_dir, dict(columns or {}), max_malformed_fraction)
            if p.suffix.lower() in BUILDERS else p for p in paths]


def table_text_file(path: Path, cache_dir: Path, columns: dict[str, str], max_malformed_fraction: float) -> Path:
    """``cache_dir/tables/<name>.<key>.txt``: the text column of ``path``, one kept row a line."""
    key = {**file_stat(path), "columns": columns, "max_malformed_fraction": max_malformed_fraction}
    out = Path(cache_dir) / "tables" / f"{path.name}.{key_digest(key, 16)}.txt"
    if out.is_file():
        return out
    table = read_table(path)
    column = require_columns(table, "sentences", columns)["text"]
    bad = MalformedRows(Counter(), max_malformed_fraction)
    kept = []
    for i, cell in enumerate(table.columns[column]):
        sentence = " ".join(text(cell).split())
        if sentence:
            kept.append(sentence)
        else:
            bad.skip(table.where(i), "empty text")
    for line in table.bad_lines:
        bad.skip(f"line {line}", "wrong number of fields")
    bad.check(str(path), len(kept))
    if not kept:
        raise DataError(f"{path}: no sentences in column {column!r}")
    atomic_write(out, "".join(f"{s}\n" for s in kept).encode("utf-8"))
    log.info("%s: wrote %d sentences of column %r to %s", path, len(kept), column, out)
    return out
