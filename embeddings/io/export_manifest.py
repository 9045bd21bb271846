"""``export_manifest.json``: every export lists its files with sizes and SHA-256, and is checked when loaded.

A truncated or garbled weight file fails deep inside safetensors, or scores silently wrong; ``verify_export`` refuses
a missing or changed file in one line (files added later are not checked; no manifest loads as before)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.io.atomic import atomic_directory
from sts_lightning.embeddings.stop_request import check_stop

MANIFEST_FILE = "export_manifest.json"
MANIFEST_FORMAT = "sts-lightning-export-manifest"
MANIFEST_VERSION = 1
CHUNK = 1 << 22

log = logging.getLogger(__name__)


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 hex digest of a file, read in 4 MiB chunks (weights can be GBs)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def export_files(folder: Path) -> list[Path]:
    """Every regular file under ``folder`` but the manifest, as sorted relative paths."""
    return sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST_FILE)


def write_manifest(folder: str | os.PathLike) -> Path:
    """List every file of ``folder`` (size and SHA-256) in ``folder/export_manifest.json``."""
    folder = Path(folder)
    files = {str(rel.as_posix()): {"bytes": (folder / rel).stat().st_size, "sha256": file_sha256(folder / rel)}
             for rel in export_files(folder)}
    path = folder / MANIFEST_FILE
    path.write_text(json.dumps({"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "files": files}, indent=1))
    return path


@contextlib.contextmanager
def export_directory(target: str | os.PathLike, needed: int | None = None) -> Iterator[Path]:
    """The one way an export is written: a temporary directory to fill, which on normal exit gets its manifest and
    replaces ``target``. ``needed``: the weights' bytes, for the error of a full disk."""
    with atomic_directory(target, needed=needed) as tmp:
        yield tmp
        check_stop("writing the export")  # a SIGTERM while the files were written: no export, the copy removed
        write_manifest(tmp)


def read_manifest(folder: Path) -> dict | None:
    """The manifest's file table, ``None`` when there is none; ``DataError`` when it is unreadable."""
    path = folder / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise DataError(f"{path}: unreadable export manifest ({err}); the export is damaged, export it again") from None
    if (not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT
            or not isinstance(manifest.get("files"), dict)):
        raise DataError(f"{path}: not an sts-lightning export manifest")
    if manifest.get("version") != MANIFEST_VERSION:
        raise DataError(f"{path}: export manifest version {manifest.get('version')}, this version reads "
                        f"{MANIFEST_VERSION}")
    return manifest["files"]


def verify_export(folder: str | os.PathLike) -> bool:
    """Check every file the manifest lists: present, same size, same SHA-256 (one ``DataError`` line otherwise).

    ``False`` when ``folder`` has no manifest: nothing to check against.
    """
    folder = Path(folder).expanduser()
    files = read_manifest(folder)
    if files is None:
        return False
    for rel, entry in files.items():
        path = folder / rel
        if not path.is_file():
            raise DataError(f"{path}: missing from the export {folder} (its manifest lists it); export it again")
        size = path.stat().st_size
        if size != entry.get("bytes"):
            raise DataError(f"{path}: {size} bytes, the export manifest says {entry.get('bytes')} (truncated or "
                            f"replaced after export); the export {folder} is damaged, export it again")
        if file_sha256(path) != entry.get("sha256"):
            raise DataError(f"{path}: checksum differs from the export manifest (corrupted or modified after "
                            f"export); the export {folder} is damaged, export it again")
    log.info("export %s: %d files verified against %s", folder, len(files), MANIFEST_FILE)
    return True
