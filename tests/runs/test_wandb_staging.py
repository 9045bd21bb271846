"""The export's snapshot in the W&B run directory: its own names, hard links, kept when the export is replaced.

The end-to-end check (a real offline run's manifest points at these files) is in ``test_wandb_export.py``.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from sts_lightning.runs.wandb_export import finished_at_end
from sts_lightning.runs.wandb_staging import fresh_dir, snapshot


def _export(root):
    export = root / "export"
    (export / "1_Pooling").mkdir(parents=True)
    (export / "model.safetensors").write_bytes(b"weights v1")
    (export / "1_Pooling" / "config.json").write_text("{}")
    return export


def test_snapshot_uses_the_exports_names_and_links_instead_of_copying(tmp_path):
    export = _export(tmp_path)
    staged = snapshot(export, tmp_path / "staging" / "model-abc")
    assert [(name, path.relative_to(tmp_path).as_posix()) for name, path in staged] == [
        ("1_Pooling/config.json", "staging/model-abc/1_Pooling/config.json"),
        ("model.safetensors", "staging/model-abc/model.safetensors")]
    assert all(path.stat().st_ino == (export / name).stat().st_ino for name, path in staged)


def test_snapshot_keeps_its_content_when_the_export_is_replaced(tmp_path):
    """The export is replaced by a rename (atomic_directory): the staged link still holds the logged bytes."""
    export = _export(tmp_path)
    staged = dict(snapshot(export, tmp_path / "staging" / "model-abc"))
    new = tmp_path / "export.new"
    new.mkdir()
    (new / "model.safetensors").write_bytes(b"weights v2")
    os.rename(export, tmp_path / "export.old")
    os.rename(new, export)
    assert staged["model.safetensors"].read_bytes() == b"weights v1"


def test_a_second_version_gets_its_own_folder(tmp_path):
    export = _export(tmp_path)
    first = snapshot(export, tmp_path / "s" / "model-abc")
    second = snapshot(export, tmp_path / "s" / "model-abc")
    assert first[0][1].parent.parent.name == "model-abc" and second[0][1].parent.parent.name == "model-abc.1"
    assert fresh_dir(tmp_path / "s" / "model-abc").name == "model-abc.2"


def test_a_copy_with_the_same_name_where_links_fail(tmp_path, monkeypatch):
    def no_links(src, dst):
        raise OSError("cross-device link")

    monkeypatch.setattr(os, "link", no_links)
    export = _export(tmp_path)
    staged = dict(snapshot(export, tmp_path / "staging" / "m"))
    path = staged["model.safetensors"]
    assert path.name == "model.safetensors" and path.read_bytes() == b"weights v1"
    assert path.stat().st_ino != (export / "model.safetensors").stat().st_ino


def _logger_with_run(calls: list):
    """A WandbLogger holding a stand-in run; not built with ``__init__``, which sets up wandb for the whole
    process (a later offline run in the same pytest process would inherit this test's mode)."""
    from lightning.pytorch.loggers import WandbLogger

    logger = WandbLogger.__new__(WandbLogger)
    logger._experiment = SimpleNamespace(finish=lambda exit_code: calls.append(exit_code))
    return logger


def test_runs_are_finished_with_the_blocks_outcome():
    calls: list[int] = []
    started, never_started = _logger_with_run(calls), _logger_with_run([])
    never_started._experiment = None  # finish() must not start a run just to end it
    with finished_at_end([started, never_started]):
        pass
    with pytest.raises(RuntimeError), finished_at_end([started]):
        raise RuntimeError("fit failed")
    assert calls == [0, 1]
