"""Write a file or directory so a reader never sees it half-written (exports, caches, converted models, reports).

Everything is built beside its target under a hidden temporary name and swapped in with ``os.replace``; on an error
the temporary copy is removed and the target untouched. ``atomic_files`` / ``atomic_file`` / ``atomic_write`` for
files, ``atomic_directory`` for a directory. A full disk becomes ``DiskFullError``. Temporary names carry their
writer's host and pid, so ``remove_orphans`` / ``sweep_orphans`` delete only those of dead processes.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import secrets
import shutil
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from sts_lightning.embeddings.io.disk_full import disk_full_cause, disk_full_error, tree_bytes

log = logging.getLogger(__name__)

HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]  # shared file systems: pids are per host
ORPHAN = re.compile(r"^\.(?P<name>.+)\.(?:tmp|stale)-(?P<host>[0-9a-f]{6})-(?P<pid>\d+)-[0-9a-f]{8}(?:\.[^.]*)?$")


def temp_path(target: Path, tag: str = "tmp") -> Path:
    """A hidden, unique name beside ``target`` naming this host and process, with its suffix (for ``np.save``)."""
    return target.with_name(f".{target.name}.{tag}-{HOST}-{os.getpid()}-{secrets.token_hex(4)}{target.suffix}")


def _writer_gone(match: re.Match) -> bool:
    """Whether the process that named this temporary copy has ended (only decidable on its own host)."""
    if match["host"] != HOST:
        return False
    pid = int(match["pid"])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by someone else
        return False
    return False


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def sweep_orphans(folder: str | os.PathLike, name: str | None = None) -> list[Path]:
    """Delete the temporary copies in ``folder`` (of ``name`` only, if given) left by dead processes; returns them."""
    folder = Path(folder)
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for entry in folder.iterdir():
        match = ORPHAN.match(entry.name)
        if match and (name is None or match["name"] == name) and _writer_gone(match):
            log.warning("removing %s: a temporary copy left by a process that was killed while writing", entry)
            _remove(entry)
            removed.append(entry)
    return removed


def remove_orphans(target: str | os.PathLike) -> list[Path]:
    """``sweep_orphans`` for the temporary copies of one target (called before each atomic write)."""
    target = Path(target)
    return sweep_orphans(target.parent, target.name)


def _raise_if_disk_full(err: BaseException, target: Path, temps: list[Path], previous: list[Path],
                        needed: int | None) -> None:
    """Remove ``temps`` and raise ``DiskFullError`` for ``target`` (the outermost one: the export, not its card)
    when ``err`` is or wraps ENOSPC / EDQUOT; a writer may set ``needed`` on its ``OSError``."""
    cause = disk_full_cause(err)
    if cause is None:
        return
    written = sum(tree_bytes(t) for t in temps)
    before = sum(tree_bytes(p) for p in previous)
    for tmp in temps:
        _remove(tmp)
    needed = max(needed or 0, getattr(cause, "needed", None) or 0) or None
    raise disk_full_error(target, needed=needed, previous=before, written=written) from err


@contextlib.contextmanager
def atomic_files(*targets: str | os.PathLike, needed: int | None = None) -> Iterator[list[Path]]:
    """Yield one temp path per target; on normal exit rename each into place, in order (a reader that checks the
    last file, a sidecar, can trust the ones before it); on an exception remove them all."""
    paths = [Path(t) for t in targets]
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        remove_orphans(p)
    tmps = [temp_path(p) for p in paths]
    try:
        yield tmps
        for tmp, path in zip(tmps, paths, strict=True):
            os.replace(tmp, path)
    except BaseException as err:
        _raise_if_disk_full(err, paths[0], tmps, paths, needed)
        raise
    finally:
        for tmp in tmps:
            tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike, needed: int | None = None) -> Iterator[Path]:
    """Yield a temp path beside ``target`` to write (stream, ``np.savez``, a plot); renamed into place on exit."""
    with atomic_files(target, needed=needed) as (tmp,):
        yield tmp


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to a temp file beside ``path``, then rename it into place (parents created)."""
    with atomic_file(path, needed=len(data)) as tmp:
        tmp.write_bytes(data)


def _ordinary_modes(root: Path) -> None:
    """Give everything under ``root`` the umask's mode (safetensors' ``save_file`` makes 0600 files)."""
    dir_mode = stat.S_IMODE(root.stat().st_mode)
    for folder, dirs, files in os.walk(root):
        for name, mode in [*((d, dir_mode) for d in dirs), *((f, dir_mode & 0o666) for f in files)]:
            path = os.path.join(folder, name)
            if not os.path.islink(path):  # a link's target may lie outside
                os.chmod(path, mode)


@contextlib.contextmanager
def atomic_directory(target: str | os.PathLike, keep: Callable[[Path], bool] | None = None,
                     needed: int | None = None) -> Iterator[Path]:
    """Yield a temp dir beside ``target``; on normal exit it replaces ``target`` (an old copy is removed).

    ``keep(target)``, asked before the swap and when the rename fails, keeps an existing complete copy (a concurrent
    run's cache). ``needed``: estimated bytes, for ``DiskFullError``."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_orphans(target)
    tmp = temp_path(target)
    tmp.mkdir()  # an ordinary directory (mode from the umask), not mkdtemp's private 0700
    try:
        yield tmp
        _ordinary_modes(tmp)
        if keep is not None and keep(target):
            return
        if target.exists():
            parked = temp_path(target, "stale")
            os.replace(target, parked)
            shutil.rmtree(parked, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:
            if keep is None or not keep(target):
                raise
    except BaseException as err:
        _raise_if_disk_full(err, target, [tmp], [target], needed)
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already after a successful rename
