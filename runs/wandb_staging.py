"""A snapshot of the export inside the W&B run directory, under the export's own file names.

Hard links (copies where links fail): no second copy on disk, and a true snapshot, since the export is only ever
replaced by a rename, which leaves linked files as they were.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def fresh_dir(base: Path) -> Path:
    """``base``, or ``base.1``, ``base.2``, ... whichever does not exist yet (an earlier version keeps its files)."""
    candidate, n = base, 0
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}.{n}")
    return candidate


def link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:  # another file system, or one without hard links
        shutil.copy2(src, dst)


def snapshot(export_dir: Path, staging: Path) -> list[tuple[str, Path]]:
    """``(path inside the export, staged file)`` for every file of ``export_dir``, staged under ``staging``."""
    target = fresh_dir(staging)
    staged = []
    for src in sorted(p for p in Path(export_dir).rglob("*") if p.is_file()):
        name = src.relative_to(export_dir).as_posix()
        link_or_copy(src, target / name)
        staged.append((name, target / name))
    return staged
