"""A write that ran out of disk space, told in one line: the file, the bytes it needs and the bytes free.

ENOSPC / EDQUOT surfaces from deep inside ``torch.save``, safetensors or numpy, often disguised as a ``RuntimeError``
with the ``OSError`` as its ``__context__``."""

from __future__ import annotations

import errno
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
SHORT_WRITE = re.compile(r"^\d+ requested and \d+ written$")  # numpy's ndarray.tofile on a short write


class DiskFullError(OSError):
    """A write ran out of disk space; an ``OSError`` (ENOSPC) whose message names the file, bytes needed and free."""

    def __init__(self, message: str, path: str | None = None, needed: int | None = None, free: int | None = None):
        super().__init__(message)
        self.errno, self.filename, self.needed, self.free = errno.ENOSPC, path, needed, free

    def __str__(self) -> str:  # OSError's own would print "[Errno 28] None: '<path>'" once a filename is set
        return str(self.args[0])


def disk_full_cause(err: BaseException | None) -> OSError | None:
    """The full disk in ``err``'s chain as an ``OSError``, or ``None``: errno ENOSPC / EDQUOT, their text in a
    message (safetensors has no errno), or numpy's short write (on a regular file, a full disk or quota)."""
    for link in exception_chain(err):
        if isinstance(link, OSError) and link.errno in FULL:
            return link
        text = str(link)
        code = next((c for c in FULL if os.strerror(c) in text or f"(os error {c})" in text), None)
        if code is None and isinstance(link, OSError) and link.errno is None and SHORT_WRITE.match(text):
            code = errno.ENOSPC
        if code is not None:
            return OSError(code, text)
    return None


def exception_chain(err: BaseException | None) -> Iterator[BaseException]:
    """``err``, then what it was raised from or during (``__cause__``, else ``__context__``), and so on."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        yield err
        seen.add(id(err))
        err = err.__cause__ or err.__context__


def tree_bytes(path: str | os.PathLike) -> int:
    """Bytes of a file, or of every file under a directory (links not followed); 0 when there is nothing."""
    path = Path(path)
    try:
        if not path.is_dir() or path.is_symlink():
            return path.lstat().st_size
    except OSError:
        return 0
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


def payload_bytes(obj: object) -> int:
    """Bytes of every tensor / array in a (nested) dict, list or tuple: about what serialising it writes
    (a checkpoint's weights and optimizer state, an export's weights). Duck-typed: no torch import here."""
    if isinstance(obj, dict):
        return sum(payload_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(payload_bytes(v) for v in obj)
    if hasattr(obj, "element_size") and hasattr(obj, "nelement"):  # a torch tensor
        return int(obj.nelement() * obj.element_size())
    return int(getattr(obj, "nbytes", 0) or 0) if hasattr(obj, "dtype") else 0


def mount_point(path: str | os.PathLike) -> Path:
    """The mount point holding ``path`` (its nearest existing ancestor's)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def human_bytes(n: float) -> str:
    """``123.4 MB``: decimal units, as ``df -H`` shows them."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def disk_full_error(path: str | os.PathLike, *, needed: int | None = None, previous: int = 0,
                    written: int = 0) -> DiskFullError:
    """The one-line error for ``path``, called once the partial copy is removed (so "free" is what is left);
    ``previous``: the size of the copy being replaced, ``written``: bytes written before the disk filled up."""
    mount = mount_point(path)
    free = shutil.disk_usage(mount).free
    estimate = max(needed or 0, previous)
    if estimate and estimate >= written:
        need = f"needs ~{human_bytes(estimate)}"
    else:
        need = f"needs more than {human_bytes(written)}" if written else "needs more space"
    return DiskFullError(f"no space left on device writing {path}: {need}, {human_bytes(free)} free on {mount}",
                         path=str(path), needed=max(estimate, written), free=free)
