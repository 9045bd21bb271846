"""``embeddings.io.disk_full``: a full disk found however it is wrapped, told in one line with sizes (issue 30)."""

from __future__ import annotations

import errno
import os
import shutil

import numpy as np
import pytest
import torch

from sts_lightning.embeddings.errors import EXIT_DISK_FULL, DiskFullError, run_or_exit
from sts_lightning.embeddings.io.disk_full import (
    disk_full_cause,
    disk_full_error,
    human_bytes,
    mount_point,
    payload_bytes,
    tree_bytes,
)

ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/somewhere/file")


def test_sizes_read_as_df_h_shows_them():
    assert [human_bytes(n) for n in (0, 999, 1000, 123_456_789, 12_000_000, 5 * 10**12)] == [
        "0 B", "999 B", "1.0 kB", "123.5 MB", "12.0 MB", "5.0 TB"]


def test_the_mount_of_a_path_not_yet_written_is_its_nearest_existing_parents(tmp_path):
    mount = mount_point(tmp_path / "not" / "yet" / "file.ckpt")
    assert os.path.ismount(mount) and str(tmp_path).startswith(str(mount))


def test_torch_saves_runtime_error_still_shows_the_full_disk():
    """``torch.save`` into a file whose write fails raises ``RuntimeError("... unexpected pos ...")``; the
    ``OSError`` is only its context."""

    class Full:  # 5000 bytes fit
        left = 5000

        def write(self, data):
            self.left -= memoryview(data).nbytes
            if self.left < 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return memoryview(data).nbytes

    with pytest.raises(RuntimeError, match="unexpected pos") as err:
        torch.save({"w": torch.zeros(100_000)}, Full())
    assert disk_full_cause(err.value).errno == errno.ENOSPC
    assert disk_full_cause(RuntimeError("other")) is None


def test_writers_that_lose_the_errno_are_recognised_by_their_message():
    """safetensors (Rust) and numpy's ``tofile`` (``np.save`` to a path) drop the errno; these are their texts
    (seen with ``RLIMIT_FSIZE``: the same messages with error 27)."""
    from safetensors import SafetensorError

    rust = SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
    assert disk_full_cause(rust).errno == errno.ENOSPC
    assert disk_full_cause(OSError("400000 requested and 1234 written")).errno == errno.ENOSPC
    assert disk_full_cause(OSError("Disk quota exceeded")).errno == errno.EDQUOT
    assert disk_full_cause(SafetensorError("Error while serializing: I/O error: File too large (os error 27)")) is None
    assert disk_full_cause(OSError(errno.EDQUOT, "quota")).errno == errno.EDQUOT  # a quota is a full disk too


def test_payload_bytes_count_tensors_and_arrays_in_nested_checkpoints():
    checkpoint = {"state_dict": {"w": torch.zeros(10, 10), "h": torch.zeros(4, dtype=torch.float16)},
                  "optimizer_states": [{"state": {0: {"exp_avg": torch.zeros(100)}}}], "step": 3,
                  "cache": np.zeros(5, np.float64)}
    assert payload_bytes(checkpoint) == 400 + 8 + 400 + 40


def test_tree_bytes_of_a_file_a_folder_and_nothing(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a").write_bytes(b"123")
    (tmp_path / "d" / "b").write_bytes(b"45")
    assert (tree_bytes(tmp_path / "d"), tree_bytes(tmp_path / "d" / "a"), tree_bytes(tmp_path / "none")) == (5, 3, 0)


def test_the_estimate_is_the_best_known_size_or_a_lower_bound(tmp_path):
    mount = mount_point(tmp_path)
    free = human_bytes(shutil.disk_usage(mount).free)
    message = str(disk_full_error(tmp_path / "x", needed=2_000_000, written=10))
    assert message == f"no space left on device writing {tmp_path / 'x'}: needs ~2.0 MB, {free} free on {mount}"
    assert "needs ~2.0 MB" in str(disk_full_error(tmp_path / "x", previous=2_000_000, written=10))
    assert "needs more than 3.0 kB" in str(disk_full_error(tmp_path / "x", needed=100, written=3000))
    assert "needs more space" in str(disk_full_error(tmp_path / "x"))


def test_run_or_exit_turns_a_wrapped_full_disk_into_one_line_and_its_exit_code(capsys, tmp_path):
    def save():
        try:
            raise DiskFullError("no space left on device writing /x: needs ~1.0 MB, 0 B free on /")
        except DiskFullError as err:
            raise RuntimeError("wrapped by a library") from err

    with pytest.raises(SystemExit) as done:
        run_or_exit(save)
    assert done.value.code == EXIT_DISK_FULL == 74
    assert capsys.readouterr().err == "error: no space left on device writing /x: needs ~1.0 MB, 0 B free on /\n"


def test_a_bare_enospc_from_a_write_outside_the_atomic_helpers_is_one_line_too(capsys):
    def log():
        raise ENOSPC

    with pytest.raises(SystemExit) as done:
        run_or_exit(log)
    assert done.value.code == EXIT_DISK_FULL
    err = capsys.readouterr().err
    assert err.startswith("error: no space left on device writing /somewhere/file: needs more space, ")
    assert err.count("\n") == 1


def test_the_checkpoints_error_wins_over_a_later_failure_while_lightning_cleans_up(capsys):
    """On a full disk the logger's final write (Lightning's ``finalize("failed")``) may fail too, during the
    handling of the checkpoint's error: the line still names the checkpoint."""

    def fit():
        try:
            raise DiskFullError("no space left on device writing /run/last.ckpt: needs ~1.0 MB, 0 B free on /",
                                path="/run/last.ckpt")
        except DiskFullError:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/run/csv/metrics.csv") from None

    with pytest.raises(SystemExit) as done:
        run_or_exit(fit)
    assert done.value.code == EXIT_DISK_FULL
    assert "writing /run/last.ckpt: needs ~1.0 MB" in capsys.readouterr().err


def test_other_errors_still_raise():
    def boom():
        raise OSError(errno.EACCES, "denied")

    with pytest.raises(OSError, match="denied"):
        run_or_exit(boom)
