"""A full disk (ENOSPC) under every kind of atomic write: files, caches, exports, packaged models (issue 30).

Each test writes a good copy first, then writes again on a disk that fills up part-way (``tests.disk_quota``
patches the writes: no tmpfs without root) and checks what a user is left with: the previous copy whole (its
SHA-256 unchanged), no temporary file or directory anywhere, and one ``DiskFullError`` line naming the target,
the bytes it needs and the bytes free on its mount.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from sts_lightning.datamodules.sentence_files import load_spans
from sts_lightning.embeddings.encoders.packaged import MARKER, materialise
from sts_lightning.embeddings.errors import DiskFullError
from sts_lightning.embeddings.io.atomic import ORPHAN, atomic_write
from sts_lightning.embeddings.io.disk_full import human_bytes
from sts_lightning.embeddings.io.export_dir import ExportFormat, save_export
from sts_lightning.embeddings.io.export_manifest import verify_export
from sts_lightning.embeddings.io.export_note import LoadingNote
from sts_lightning.embeddings.io.npy_cache import npy_cache_writer, open_npy_memmap, save_npy_cache
from tests.disk_quota import disk_full

FMT = ExportFormat("sts-lightning/test", 1, "test_config.json", "test.safetensors", "test")
LINE = re.compile(r"no space left on device writing (?P<path>\S+): needs (?:~|more than )(?P<need>[\d.]+ [kMGT]?B), "
                  r"(?P<free>[\d.]+ [kMGT]?B) free on (?P<mount>/\S*)$")


def checksums(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root`` (or of ``root`` itself), by relative path."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root.parent)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def leftovers(root: Path) -> list[str]:
    """Temporary copies anywhere under ``root``."""
    return sorted(p.name for p in root.rglob("*") if ORPHAN.match(p.name))


def one_line(err: DiskFullError, target: Path) -> re.Match:
    message = str(err)
    assert "\n" not in message
    found = LINE.match(message)
    assert found, message
    assert found["path"] == str(target)
    assert err.errno == 28 and err.filename == str(target) and err.free is not None
    return found


def test_a_file_keeps_its_previous_copy_and_the_error_names_its_exact_size(tmp_path):
    target = tmp_path / "results.json"
    atomic_write(target, b"old results")
    before = checksums(target)
    with disk_full("results.json", nbytes=4) as quota, pytest.raises(DiskFullError) as err:
        atomic_write(target, b"x" * 12345)
    assert quota.failed  # the disk did fill up inside the write
    assert checksums(target) == before and leftovers(tmp_path) == []
    assert one_line(err.value, target)["need"] == human_bytes(12345) == "12.3 kB"


def test_an_npy_cache_keeps_its_previous_array_and_sidecar(tmp_path):
    target = tmp_path / "features" / "abc.npy"
    save_npy_cache(target, np.ones((50, 8), np.float32), {"key": "k"})
    before = checksums(target.parent)
    with disk_full("abc.npy", nbytes=100), pytest.raises(DiskFullError) as err:
        save_npy_cache(target, np.zeros((500, 8), np.float32), {"key": "k"})
    assert checksums(target.parent) == before and leftovers(tmp_path) == []
    assert one_line(err.value, target)["need"] == human_bytes(500 * 8 * 4)  # the new array's bytes


def test_a_memory_mapped_cache_is_refused_up_front_with_its_exact_size(tmp_path):
    """``open_npy_memmap`` allocates every block first: a full disk is an error before any encoding, not a
    SIGBUS when a page is written back."""
    target = tmp_path / "token_states.npy"
    with disk_full("token_states", nbytes=1000), pytest.raises(DiskFullError) as err:
        with npy_cache_writer(target, {"key": "k"}) as tmp:
            open_npy_memmap(tmp, np.float32, (1000, 64))
            raise AssertionError("the full disk was not seen before the array was filled")
    assert not target.exists() and leftovers(tmp_path) == []
    assert one_line(err.value, target)["need"] == human_bytes(1000 * 64 * 4 + 128)  # array + .npy header


def test_an_export_keeps_the_previous_export_verified(tmp_path):
    target = tmp_path / "export"
    save_export(target, FMT, {"a": 1}, {"w": torch.ones(10, 10)})
    before = checksums(target)
    weights = {"w": torch.zeros(300, 100)}
    with disk_full(".export.tmp-", nbytes=1000), pytest.raises(DiskFullError) as err:
        save_export(target, FMT, {"a": 2}, weights)
    assert checksums(target) == before and verify_export(target) is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
    assert one_line(err.value, target)["need"] == human_bytes(300 * 100 * 4)  # the weights' bytes


def test_a_note_written_inside_an_export_blames_the_export(tmp_path):
    """The note's own atomic write fails first; the error names the export the user asked for."""
    target = tmp_path / "export"
    note = LoadingNote("a test model", "python evaluate.py encoders=[x]")
    with disk_full("LOADING.md", nbytes=10), pytest.raises(DiskFullError) as err:
        save_export(target, FMT, {"a": 1}, {"w": torch.ones(4)}, note=note)
    assert not target.exists() and leftovers(tmp_path) == []
    one_line(err.value, target)


def test_a_packaged_model_cache_is_never_half_built(tmp_path):
    target = tmp_path / "models" / "tiny"

    def build(folder: Path) -> None:
        (folder / "model.bin").write_bytes(b"\1" * 5000)

    materialise(target, build, stamp="v1")
    before = checksums(target)
    with disk_full("models", nbytes=100), pytest.raises(DiskFullError) as err:
        materialise(target, build, stamp="v2")  # another version: rebuilt
    assert checksums(target) == before and json.loads((target / MARKER).read_text())["stamp"] == "v1"
    assert leftovers(tmp_path) == []
    one_line(err.value, target)


def test_a_sentence_index_cache_is_never_half_written(tmp_path):
    corpus = tmp_path / "sentences.txt"
    corpus.write_text("".join(f"sentence number {i} here .\n" for i in range(2000)))
    with disk_full("sentence-index", nbytes=200), pytest.raises(DiskFullError) as err:
        load_spans(corpus, tmp_path / "cache")
    assert leftovers(tmp_path) == [] and list((tmp_path / "cache" / "sentence-index").iterdir()) == []
    assert "sentence-index" in str(err.value) and one_line(err.value, Path(err.value.filename))
