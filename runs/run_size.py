"""The disk space a run directory takes, for the run summary: each file once (per inode, as ``du`` counts), since a
checkpoint saved twice at one step is one file with two names (``runs.checkpoint_links``).
"""

from __future__ import annotations

import os
from pathlib import Path


def directory_bytes(folder: str | os.PathLike) -> tuple[int, int]:
    """``(bytes on disk by file size, files with more than one name here)`` under ``folder`` (no symlinks followed)."""
    seen: set[tuple[int, int]] = set()
    total = shared = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                info = os.lstat(os.path.join(root, name))
            except OSError:  # removed meanwhile
                continue
            key = (info.st_dev, info.st_ino)
            if key in seen:
                shared += 1
                continue
            seen.add(key)
            total += info.st_size
    return total, shared


def human_bytes(count: int) -> str:
    """``212 MB``, ``1.4 GB``, ``36 kB`` (decimal units, as file managers show them)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            value = count / size
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{count} B"


def size_line(output_dir: Path) -> str:
    """``run directory: 212 MB`` (and how many checkpoint names share a file with another)."""
    total, shared = directory_bytes(output_dir)
    note = f" ({shared} file{'s' if shared != 1 else ''} shared by two names, counted once)" if shared else ""
    return f"run directory: {human_bytes(total)}{note}"
