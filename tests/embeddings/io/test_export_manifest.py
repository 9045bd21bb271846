"""Export manifests: every export lists its files' sizes and SHA-256; a damaged file is refused by name."""

from __future__ import annotations

import json

import pytest
import torch

from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.io.export_dir import ExportFormat, load_export, save_export
from sts_lightning.embeddings.io.export_manifest import MANIFEST_FILE, export_directory, verify_export
from sts_lightning.embeddings.io.export_note import LoadingNote

FMT = ExportFormat("test-export", 1, "test_config.json", "test.safetensors", "test")


def _export(tmp_path):
    return save_export(tmp_path / "export", FMT, {"dim": 4}, {"w": torch.arange(64.0).reshape(16, 4)},
                       LoadingNote("a test export", "python evaluate.py ..."))


def test_the_manifest_lists_every_file_including_the_note(tmp_path):
    folder = _export(tmp_path)
    files = json.loads((folder / MANIFEST_FILE).read_text())["files"]
    assert sorted(files) == ["LOADING.md", "modules.json", "sentence_transformers_refusal.json", "test.safetensors",
                            "test_config.json"]
    assert verify_export(folder) is True
    config, tensors = load_export(folder, FMT)
    assert config["dim"] == 4 and tensors["w"].shape == (16, 4)


@pytest.mark.parametrize("damage", ["garble", "truncate", "delete"])
def test_item8_a_damaged_export_is_refused_naming_the_file(damage, tmp_path):
    folder = _export(tmp_path)
    weights = folder / FMT.weights_file
    data = bytearray(weights.read_bytes())
    if damage == "garble":  # one byte of a float: the values stay finite, only the checksum can tell
        data[-7] ^= 0x01
        weights.write_bytes(bytes(data))
    elif damage == "truncate":
        weights.write_bytes(bytes(data[: len(data) // 2]))
    else:
        weights.unlink()
    with pytest.raises(DataError, match=rf"{weights}: .*(checksum|bytes|missing)"):
        load_export(folder, FMT)


def test_files_added_later_are_not_checked_and_old_exports_have_nothing_to_check(tmp_path):
    folder = _export(tmp_path)
    (folder / "my_notes.txt").write_text("added by a user")
    assert verify_export(folder) is True
    (folder / MANIFEST_FILE).unlink()  # an export written before manifests
    assert verify_export(folder) is False
    assert load_export(folder, FMT)[0]["dim"] == 4


def test_a_garbled_manifest_is_refused(tmp_path):
    folder = _export(tmp_path)
    (folder / MANIFEST_FILE).write_text("{not json")
    with pytest.raises(DataError, match=MANIFEST_FILE):
        verify_export(folder)


def test_an_export_interrupted_before_its_manifest_is_never_swapped_in(tmp_path):
    with pytest.raises(RuntimeError), export_directory(tmp_path / "export") as tmp:
        (tmp / "weights.bin").write_bytes(b"12")
        raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []
