"""Fingerprints of model files, for cache keys (sources and the DataModules' caches key on the same identity)."""

from __future__ import annotations

from pathlib import Path

from sts_lightning.embeddings.encoders.packaged import resolve_model_path
from sts_lightning.embeddings.errors import ConfigError


def file_stat(path: Path) -> dict:
    """Resolved path, size and mtime of one file: changes when the file is rewritten."""
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def model_fingerprint(name: str) -> dict:
    """The model name plus size / mtime of its files when it is (or resolves to) a local directory (a directory
    retrained in place keeps its name, not its stats)."""
    try:
        local = Path(resolve_model_path(name))
    except ConfigError:  # a static packaged model: its package version is its identity
        return {"name": name}
    if not local.is_dir():
        return {"name": name}  # a hub name: the name is all we know offline
    files = sorted(p for p in local.rglob("*")
                   if p.is_file() and not any(part.startswith(".") for part in p.relative_to(local).parts))
    return {"name": name, "files": [file_stat(p) for p in files]}
