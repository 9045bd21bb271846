"""Write a file or directory so a reader never sees it half-written (exports, converted models, reports).

Why: an interrupted export that leaves a plausible-looking but incomplete directory is silent data
loss the next time it is loaded. Build beside the target, then swap it in with ``os.replace``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from embeddings.errors import ConfigError


@contextlib.contextmanager
def atomic_directory(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp dir beside ``target``; on normal exit it replaces ``target`` (old copy removed)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp", dir=target.parent))
    try:
        yield tmp
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.old{os.getpid()}")
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to a temp file beside ``path``, then rename it into place (parents created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def read_export_config(folder: str | os.PathLike, config_file: str, fmt: str, version: int, what: str) -> dict:
    """The JSON config of an export directory, refusing a missing file or another format / version.

    Why one place: every method export (BERT-flow, token VAEs) carries ``{"format", "version", ...}`` and must
    fail with the same clear message instead of loading weights into the wrong network.
    """
    import json


    path = Path(folder) / config_file
    if not path.is_file():
        raise ConfigError(f"{Path(folder)} is not a {what} export: no {config_file}")
    config = json.loads(path.read_text())
    if config.get("format") != fmt or config.get("version") != version:
        raise ConfigError(f"{path}: format {config.get('format')!r} v{config.get('version')}, "
                          f"expected {fmt!r} v{version}")
    return config
