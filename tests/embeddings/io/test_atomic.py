"""Atomic writes leave no orphans: a writer killed mid-write leaves its temporary copy, the next write removes it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sts_lightning.embeddings.io.atomic import atomic_directory, atomic_write, sweep_orphans, temp_path

KILLED_WRITER = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from sts_lightning.embeddings.io.atomic import atomic_directory, atomic_file
    target = Path(sys.argv[1])
    if sys.argv[2] == "dir":
        with atomic_directory(target) as tmp:
            (tmp / "half.bin").write_bytes(b"x" * 100)
            os._exit(137)  # kill -9: no finally, no cleanup
    with atomic_file(target) as tmp:
        tmp.write_bytes(b"x" * 100)
        os._exit(137)
""")


def _killed_write(target: Path, kind: str) -> list[Path]:
    """Run a writer that dies mid-write; return the hidden temporary copies it left beside ``target``."""
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(target), kind], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True)
    assert proc.returncode == 137, proc.stderr
    return [p for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.")]


@pytest.mark.parametrize("kind", ["dir", "file"])
def test_a_killed_writers_temporary_copy_is_removed_by_the_next_write(kind, tmp_path, caplog):
    target = tmp_path / ("export" if kind == "dir" else "vectors.npy")
    left = _killed_write(target, kind)
    assert len(left) == 1 and not target.exists()  # the orphan exists, the target was never half-written
    if kind == "dir":
        with atomic_directory(target) as tmp:
            (tmp / "done.txt").write_text("ok")
    else:
        atomic_write(target, b"ok")
    assert not left[0].exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]
    assert "killed while writing" in caplog.text


def test_a_live_writers_temporary_copy_is_never_removed(tmp_path):
    target = tmp_path / "export"
    mine = temp_path(target)  # this process is alive
    mine.mkdir()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        theirs = mine.with_name(mine.name.replace(f"-{os.getpid()}-", f"-{live.pid}-"))
        theirs.mkdir()
        assert sweep_orphans(tmp_path) == []
        assert mine.exists() and theirs.exists()
    finally:
        live.kill()
        live.wait()
    assert sweep_orphans(tmp_path) == [theirs]  # now its writer is gone


def test_another_hosts_temporary_copy_is_left_alone(tmp_path):
    """On a shared file system a pid means nothing across hosts: only our host's dead writers are removed."""
    from sts_lightning.embeddings.io.atomic import HOST

    other_host = "ffffff" if HOST != "ffffff" else "000000"
    other = tmp_path / f".export.tmp-{other_host}-{2**22 + 7}-0123abcd"  # no such pid here: still kept
    other.mkdir()
    assert sweep_orphans(tmp_path) == []
    assert other.exists()
