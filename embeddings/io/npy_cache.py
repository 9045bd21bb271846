"""Arrays kept in a ``.npy`` cache with a JSON sidecar that says what they were computed from.

A cache is ``<name>.npy`` plus ``<name>.json`` (``{"key", "shape", ...}``), named by ``key_digest`` of the key, which
the sidecar repeats so a reader checks it. Writes are atomic, the array before its sidecar; a bad cache is rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.io.atomic import atomic_files
from sts_lightning.embeddings.io.disk_full import FULL

log = logging.getLogger(__name__)


def key_digest(key: Mapping, length: int = 20) -> str:
    """A stable hash of a JSON-able key, for file names."""
    return hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:length]


def sidecar_of(path: str | os.PathLike) -> Path:
    """The sidecar of an array (or of a cache stem): the same name with ``.json``."""
    return Path(path).with_suffix(".json")


def read_sidecar(meta_file: Path, expect: Mapping) -> tuple[dict | None, str]:
    """``(sidecar, problem)``: ``problem`` is ``""`` when the file exists, parses and agrees with ``expect``
    on each of its fields (e.g. ``{"key": key}``), else why not (``"missing"`` when there is no file)."""
    if not meta_file.is_file():
        return None, "missing"
    try:
        info = json.loads(meta_file.read_text())
    except (OSError, ValueError) as err:
        return None, f"unreadable ({err})"
    if not isinstance(info, dict):
        return None, "unreadable (the sidecar is not a JSON object)"
    differ = [k for k, v in expect.items() if info.get(k) != v]
    return info, f"its {'/'.join(differ)} differs from this run's" if differ else ""


def write_sidecar(meta_file: Path, sidecar: Mapping) -> None:
    meta_file.write_text(json.dumps(dict(sidecar), indent=1))


def inspect_npy_cache(path: str | os.PathLike, expect: Mapping, dtype=np.float32) -> tuple[dict | None, str]:
    """``(sidecar, problem)`` of the array at ``path``: ``problem`` is ``""`` when usable, else why not."""
    path = Path(path)
    if not path.is_file():
        return None, "missing"
    info, problem = read_sidecar(sidecar_of(path), expect)
    if problem:
        return info, problem
    try:
        array = np.load(path, mmap_mode="r")  # a truncated .npy fails numpy's length check here
    except (OSError, ValueError) as err:
        return info, f"unreadable ({err})"
    if list(array.shape) != info.get("shape") or array.dtype != np.dtype(dtype):
        return info, f"array {array.shape} {array.dtype} does not match its sidecar {info.get('shape')}"
    bad = non_finite_rows(array)
    if bad:
        return info, f"{len(bad)} rows hold NaN or infinite values (first: row {bad[0]})"
    return info, ""


def non_finite_rows(array: np.ndarray, chunk: int = 1 << 14) -> list[int]:
    """Indices of the rows holding NaN or +-inf, ``chunk`` rows at a time (checked on every load: a NaN feature row
    trains a NaN loss that looks like a learning-rate problem)."""
    if array.dtype.kind != "f" or array.size == 0:
        return []
    bad: list[int] = []
    for start in range(0, array.shape[0], chunk):
        block = np.asarray(array[start:start + chunk]).reshape(min(chunk, array.shape[0] - start), -1)
        bad.extend((start + np.flatnonzero(~np.isfinite(block).all(axis=1))).tolist())
    return bad


def npy_cache_problem(path: str | os.PathLike, expect: Mapping, dtype=np.float32) -> str:
    """Why the cache at ``path`` cannot be used, ``""`` if it can (see ``inspect_npy_cache``)."""
    return inspect_npy_cache(path, expect, dtype)[1]


def load_npy_cache(path: str | os.PathLike, expect: Mapping, what: str, mmap_mode: str | None = None,
                   dtype=np.float32) -> np.ndarray | None:
    """The cached array, or ``None`` when it must be (re)built -- with a warning unless it was just missing."""
    problem = npy_cache_problem(path, expect, dtype)
    if problem:
        if problem != "missing":
            log.warning("%s cache %s is not usable (%s): rebuilding it", what, path, problem)
        return None
    log.info("using cached %s %s", what, path)
    return np.load(path, mmap_mode=mmap_mode)


@contextlib.contextmanager
def npy_cache_writer(path: str | os.PathLike, sidecar: Mapping, needed: int | None = None) -> Iterator[Path]:
    """Yield a temp ``.npy`` path to fill; on normal exit write the sidecar (with the array's ``shape``) and rename
    both into place, the array first. ``needed``: the array's bytes, for the error of a full disk."""
    path = Path(path)
    with atomic_files(path, sidecar_of(path), needed=needed) as (tmp_array, tmp_meta):
        yield tmp_array
        written = np.load(tmp_array, mmap_mode="r")
        bad = non_finite_rows(written)
        if bad:  # a broken encoder (e.g. an overflow): refuse to cache it, say where, instead of training on NaN
            raise DataError(f"{path}: not cached: {len(bad)} of {written.shape[0]} computed rows hold NaN or "
                            f"infinite values (first: row {bad[0]}); the model that computed them is broken "
                            "(diverged weights, or an overflow in reduced precision)")
        write_sidecar(tmp_meta, {**dict(sidecar), "shape": list(written.shape)})


def open_npy_memmap(path: str | os.PathLike, dtype, shape: tuple[int, ...]) -> np.memmap:
    """``np.lib.format.open_memmap(path, "w+")`` with its blocks allocated first: a sparse file on a full disk
    dies of SIGBUS on write-back; ``posix_fallocate`` makes that an ``OSError`` here, before any work."""
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize  # the array; its header (~128 B) is added once written
    try:
        out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
        with open(path, "r+b") as fh:
            size = os.fstat(fh.fileno()).st_size
            try:
                os.posix_fallocate(fh.fileno(), 0, size)
            except OSError as err:
                if err.errno in FULL:
                    raise
                # EOPNOTSUPP / EINVAL: no allocation ahead on this file system: keep the sparse file
    except OSError as err:
        if err.errno in FULL:
            err.needed = size
        raise
    return out


def save_npy_cache(path: str | os.PathLike, array: np.ndarray, sidecar: Mapping) -> None:
    """``array`` and its sidecar, atomically (see ``npy_cache_writer``)."""
    with npy_cache_writer(path, sidecar, needed=array.nbytes) as tmp:
        np.save(tmp, array)
