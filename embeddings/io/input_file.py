"""``require_file``: the one check that an input file is there and readable, with the message that fits (missing,
a directory, a dangling link or unreadable are different fixes)."""

from __future__ import annotations

import os
from pathlib import Path

from sts_lightning.embeddings.errors import DataError


def require_file(path: str | os.PathLike, what: str = "file") -> Path:
    """``path`` (``~`` expanded) when it is a readable regular file; else ``DataError`` naming ``what`` it is instead."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise DataError(f"{path}: a directory, not a {what}")
    if path.is_symlink() and not path.exists():
        raise DataError(f"{path}: a broken symbolic link (to {os.readlink(path)}), not a {what}")
    if not path.exists():
        parent = next((p for p in path.parents if p.exists()), None)
        hint = "" if parent == path.parent else f" (nor its directory {path.parent})"
        raise DataError(f"{path}: {what} not found{hint}")
    if not path.is_file():
        raise DataError(f"{path}: not a regular {what} (a device, socket or pipe)")
    if not os.access(path, os.R_OK):
        raise DataError(f"{path}: {what} not readable (permission denied)")
    return path


def require_dir(path: str | os.PathLike, what: str = "directory") -> Path:
    """``path`` when it is a directory; else ``DataError`` saying what it is instead (a file, nothing)."""
    path = Path(path).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise DataError(f"{path}: a file, not a {what}")
    raise DataError(f"{path}: {what} not found")
