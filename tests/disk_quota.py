"""A disk that fills up: writes to chosen files raise ``OSError(ENOSPC)`` once a byte budget is spent.

Why patched writes, not a small tmpfs: mounting needs root, which tests (and CI containers) do not have. The
patch sits where our writers' bytes pass in Python, so each writer fails the way it would on a full disk, from
its own call site and with its own wrapping (``torch.save`` turns the ``OSError`` into a ``RuntimeError``):

- ``open`` / ``io.open`` (hence ``Path.write_text`` / ``write_bytes``, ``np.save``, ``torch.save`` into an
  open file, JSON and Markdown reports): a file opened for writing is wrapped; its ``write`` writes what still
  fits, then raises;
- ``safetensors.torch.save_file`` (Rust writes its file itself; ``save_pretrained`` binds it as
  ``transformers.modeling_utils.safe_save_file``): serialised in memory, then written through ``open``, and a
  full disk raised as the Rust writer raises it (``SafetensorError``, errno 28 only in its message);
- ``os.posix_fallocate`` (``embeddings.io.npy_cache.open_npy_memmap``): refused when the budget is smaller.

Only files whose path contains ``match`` count; the first ``skip`` of them are written in full (the previous
checkpoint a test checks stays whole); after that ``nbytes`` bytes fit, and then the disk stays full for every
matching file. ``FAULT_ENOSPC="<match>:<skip>:<nbytes>"`` installs the same in a subprocess
(``tests.runs.fault_driver``).
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

WRITE_MODES = set("wax+")


@dataclass
class Quota:
    """What is left: ``skip`` whole files still allowed, then ``left`` bytes."""

    match: str
    skip: int
    left: int
    opened: dict[str, bool] = field(default_factory=dict)  # matching files opened for writing: written in full?
    failed: list[str] = field(default_factory=list)  # the files whose write hit the full disk

    def full(self, name: str) -> OSError:
        self.failed.append(name)
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)


class QuotaFile:
    """A writable file whose ``write`` spends the quota (everything else is the real file's)."""

    def __init__(self, fh, quota: Quota, name: str, free: bool):
        self._fh, self._quota, self._name, self._free = fh, quota, name, free

    def write(self, data) -> int:
        if self._free:
            return self._fh.write(data)
        size = len(data.encode()) if isinstance(data, str) else memoryview(data).nbytes
        if size > self._quota.left:  # what fits is written (as a real disk does), then the error
            fits, self._quota.left = self._quota.left, 0
            self._fh.write(data[:fits] if isinstance(data, str) else bytes(memoryview(data).cast("B")[:fits]))
            self._fh.flush()
            raise self._quota.full(self._name)
        self._quota.left -= size
        return self._fh.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._fh.close()

    def __iter__(self):
        return iter(self._fh)

    def __getattr__(self, name):
        return getattr(self._fh, name)


def install(match: str, skip: int, nbytes: int) -> tuple[Quota, contextlib.ExitStack]:
    """Patch the writers (see the module docstring); close the returned stack to undo it."""
    quota = Quota(match, skip, nbytes)
    real_open, real_fallocate = builtins.open, os.posix_fallocate

    def free(name: str) -> bool:
        """Whether the matching file ``name`` is written in full: decided when it is first opened (numpy opens
        a memory-mapped file three times)."""
        if name not in quota.opened:
            quota.opened[name] = quota.skip > 0
            quota.skip -= 1
        return quota.opened[name]

    def quota_open(file, mode="r", *args, **kwargs):
        fh = real_open(file, mode, *args, **kwargs)
        if isinstance(file, int) or not WRITE_MODES & set(mode) or match not in os.fsdecode(file):
            return fh
        name = os.path.abspath(os.fsdecode(file))
        return QuotaFile(fh, quota, name, free(name))

    def fallocate(fd: int, offset: int, length: int) -> None:
        name = os.readlink(f"/proc/self/fd/{fd}")
        if match in name and not free(name) and length > quota.left:
            raise quota.full(name)
        real_fallocate(fd, offset, length)

    def save_file(tensors, filename, metadata=None) -> None:
        """safetensors' own writer, failing as its Rust code does: ``SafetensorError``, the errno only in the text."""
        from safetensors import SafetensorError
        from safetensors.torch import save

        data = save(tensors, metadata)
        try:
            with quota_open(filename, "wb") as fh:
                fh.write(data)
        except OSError as err:
            raise SafetensorError(f"Error while serializing: I/O error: {err.strerror} (os error {err.errno})") from None

    stack = contextlib.ExitStack()
    patches = [(builtins, "open", quota_open), (io, "open", quota_open), (os, "posix_fallocate", fallocate)]
    import safetensors.torch

    patches.append((safetensors.torch, "save_file", save_file))
    with contextlib.suppress(ImportError):
        import transformers.modeling_utils as modeling_utils

        patches.append((modeling_utils, "safe_save_file", save_file))
    for module, name, value in patches:
        stack.callback(setattr, module, name, getattr(module, name))
        setattr(module, name, value)
    return quota, stack


@contextlib.contextmanager
def disk_full(match: str, skip: int = 0, nbytes: int = 0) -> Iterator[Quota]:
    """``install`` for the block: the disk fills up ``nbytes`` into the ``skip + 1``-th file matching ``match``."""
    quota, stack = install(match, skip, nbytes)
    with stack:
        yield quota


def install_from_env(variable: str = "FAULT_ENOSPC") -> Quota | None:
    """``install`` from ``"<match>:<skip>:<nbytes>"`` in the environment (for a subprocess), if set."""
    spec = os.environ.get(variable)
    if not spec:
        return None
    match, skip, nbytes = spec.rsplit(":", 2)
    return install(match, int(skip), int(nbytes))[0]
