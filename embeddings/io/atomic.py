"""Write a file or directory so a reader never sees it half-written (exports, caches, converted models, reports).

Why: an interrupted write that leaves a plausible-looking but incomplete file or directory is silent data
loss the next time it is loaded. Everything is built beside its target under a hidden temporary name and
then swapped in with ``os.replace``; on an error the temporary copy is removed and the target is untouched.
This module is the only place in the project that does that dance:

- ``atomic_files(*targets)``: temp paths for several files, renamed in the given order (an array before
  the sidecar that describes it); ``atomic_file`` / ``atomic_write`` are its one-file forms.
- ``atomic_directory(target)``: a directory built in full, then swapped in (an existing one replaced, or
  kept when ``keep`` says it is already complete, e.g. written by a concurrent run).

A full disk (ENOSPC / EDQUOT, however deep and however wrapped) becomes ``DiskFullError`` after the temporary
copy is removed: one line naming the target, the bytes it needs and the bytes free (``embeddings.io.disk_full``;
``needed=`` is the writer's estimate of the whole output), the previous target untouched.

Orphans: a process killed mid-write (kill -9, OOM, preemption) cannot clean up, so its temporary copy
stays. Every temporary name carries its writer's host and process id (``.<name>.tmp-<host>-<pid>-<random>``);
the next write beside it (``remove_orphans``, called by every writer here) or a sweep of a run directory
(``sweep_orphans``) deletes those whose process is gone, and never one a live process is still writing.
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
    """A hidden, unique name beside ``target`` naming this host and process, keeping the target's suffix
    (``np.save`` appends ``.npy`` otherwise)."""
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
    """Delete the temporary copies in ``folder`` (of ``name`` only, if given) left by dead processes.

    Returns what was removed (a warning names each): half-written checkpoints, exports or caches that no
    process will ever finish.
    """
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
    """Remove ``temps`` and raise ``DiskFullError`` for ``target`` when ``err`` is (or wraps) ENOSPC / EDQUOT.

    Measured before the temporary copies go: what was written (a lower bound) and the copies being replaced.
    A ``DiskFullError`` of a nested write (the model card inside an export's temporary directory) is raised
    again for this target: the user frees space for the export, not for its card. A writer that knows the
    size only once it fails (a preallocated memory map) sets ``needed`` on its ``OSError``.
    """
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
    """Yield one temp path per target (parents created); on normal exit rename each into place, in order.

    Why the order: a reader that checks the last file (a sidecar) never finds it describing files that are
    not yet in place. On an exception nothing is renamed and every temp file is removed; a full disk is
    raised as ``DiskFullError`` naming the first target (``needed``: the writer's estimate of all of them).
    """
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
    """Give everything under ``root`` the mode a new file or directory gets from the umask (root's own mode).

    Why: some writers make private files whatever the umask (safetensors 0.8's ``save_file``, hence
    ``save_pretrained``: 0600), and an export or a cache is read by other users and tools.
    """
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

    Args:
        target: the directory to write.
        keep: asked (with ``target``) before the swap and when the rename fails; ``True`` keeps the existing
            ``target`` and drops the new copy. Why: a cache built by concurrent runs (packaged models) keeps
            whichever complete copy won the race instead of replacing it under a reader.
        needed: the writer's estimate of the whole directory in bytes, for the ``DiskFullError`` of a full disk
            (else the previous copy's size, or what was written before the disk filled up).
    """
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
