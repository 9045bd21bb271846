"""``embeddings.io.export_dir`` (the one export-directory format of BERT-flow, token VAEs, meta-embeddings) and
the atomic writers of ``embeddings.io.atomic`` it stands on."""

from __future__ import annotations

import json

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.atomic import atomic_directory, atomic_file, atomic_files
from sts_lightning.embeddings.io.export_dir import ExportFormat, load_export, load_export_config, save_export
from sts_lightning.embeddings.io.export_manifest import MANIFEST_FILE
from sts_lightning.embeddings.methods.flow.scorer import EXPORT_FORMAT as FLOW
from sts_lightning.embeddings.methods.latte_mix.nets import EXPORT_FORMAT as TOKEN_VAE
from sts_lightning.embeddings.methods.meta.scorer import EXPORT_FORMAT as META

FMT = ExportFormat("sts-lightning/test", 3, "test_config.json", "test.safetensors", "test")


def test_round_trip_keeps_the_file_names_and_json_layout(tmp_path):
    tensors = {"w": torch.arange(6.0).view(2, 3).t(), "b": torch.ones(2, requires_grad=True)}  # non-contiguous, grad
    target = save_export(tmp_path / "out", FMT, {"z": 1, "a": [2, 3]}, tensors)
    assert sorted(p.name for p in target.iterdir()) == ["export_manifest.json", "modules.json",
                                                        "sentence_transformers_refusal.json", "test.safetensors",
                                                        "test_config.json"]
    text = (target / "test_config.json").read_text()
    assert text == json.dumps({"format": "sts-lightning/test", "version": 3, "z": 1, "a": [2, 3]}, indent=2)
    config, loaded = load_export(target, FMT)
    assert config["z"] == 1 and config["format"] == FMT.tag
    torch.testing.assert_close(loaded["w"], tensors["w"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temp dir left beside it


def test_the_method_formats_keep_their_names():
    assert (FLOW.config_file, FLOW.weights_file, FLOW.tag, FLOW.version) == (
        "flow_config.json", "flow.safetensors", "sts-lightning/bert-flow", 1)
    assert (TOKEN_VAE.config_file, TOKEN_VAE.weights_file, TOKEN_VAE.tag) == (
        "token_vae_config.json", "token_vae.safetensors", "sts-lightning/token-vae")
    assert (META.config_file, META.weights_file, META.tag) == (
        "meta_config.json", "meta.safetensors", "sts-lightning/meta-embedding")


def test_save_replaces_an_existing_export(tmp_path):
    save_export(tmp_path / "out", FMT, {"n": 1}, {"x": torch.zeros(1)})
    (tmp_path / "out" / "stale.txt").write_text("old")
    save_export(tmp_path / "out", FMT, {"n": 2}, {"x": torch.ones(1)})
    assert load_export_config(tmp_path / "out", FMT)["n"] == 2 and not (tmp_path / "out" / "stale.txt").exists()


@pytest.mark.parametrize("damage, message", [
    ("no dir", "no such directory"), ("no config", "no test_config.json"), ("other format", "expected"),
    ("other version", "v2, expected"), ("no weights", "no test.safetensors"), ("bad json", "not valid JSON")])
def test_bad_exports_raise_a_clear_config_error(tmp_path, damage, message):
    folder = save_export(tmp_path / "out", FMT, {}, {"x": torch.zeros(1)})
    (folder / MANIFEST_FILE).unlink()  # these checks hold without a manifest (older exports); with one, see
    config_file = folder / FMT.config_file  # tests/embeddings/io/test_export_manifest.py
    if damage == "no dir":
        folder = tmp_path / "missing"
    elif damage == "no config":
        config_file.unlink()
    elif damage == "other format":
        config_file.write_text(json.dumps({"format": "sts-lightning/bert-flow", "version": 3}))
    elif damage == "other version":
        config_file.write_text(json.dumps({"format": FMT.tag, "version": 2}))
    elif damage == "no weights":
        (folder / FMT.weights_file).unlink()
    else:
        config_file.write_text("{")
    with pytest.raises(ConfigError, match=message):
        load_export(folder, FMT)


def test_a_failed_save_leaves_the_old_export_and_no_temp_dir(tmp_path):
    save_export(tmp_path / "out", FMT, {"n": 1}, {"x": torch.zeros(1)})
    with pytest.raises(TypeError):
        save_export(tmp_path / "out", FMT, {"n": object()}, {"x": torch.ones(1)})  # not JSON-able
    assert load_export_config(tmp_path / "out", FMT)["n"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_atomic_files_rename_in_order_and_clean_up_on_error(tmp_path):
    a, b = tmp_path / "x" / "a.npy", tmp_path / "x" / "a.json"
    with pytest.raises(RuntimeError), atomic_files(a, b) as (ta, tb):
        ta.write_text("array")
        raise RuntimeError("killed")
    assert list((tmp_path / "x").iterdir()) == []
    with atomic_files(a, b) as (ta, tb):
        assert ta.suffix == ".npy" and ta.name.startswith(".a.npy.")
        ta.write_text("array")
        tb.write_text("sidecar")
        assert not a.exists()
    assert a.read_text() == "array" and b.read_text() == "sidecar"
    assert sorted(p.name for p in a.parent.iterdir()) == ["a.json", "a.npy"]
    with atomic_file(a) as tmp:
        tmp.write_text("new")
    assert a.read_text() == "new"


def test_atomic_directory_keep_leaves_a_complete_target(tmp_path):
    target = tmp_path / "d"
    target.mkdir()
    (target / "done").write_text("winner")
    with atomic_directory(target, keep=lambda t: (t / "done").is_file()) as tmp:
        (tmp / "done").write_text("loser")
    assert (target / "done").read_text() == "winner" and [p.name for p in tmp_path.iterdir()] == ["d"]
    with atomic_directory(target) as tmp:
        (tmp / "new").write_text("x")
    assert [p.name for p in target.iterdir()] == ["new"] and [p.name for p in tmp_path.iterdir()] == ["d"]


def test_sentence_transformers_refuses_a_fitted_export_in_one_line(tmp_path):
    """Issue 48: no ``config.json`` puzzle and never mean pooling: its own refusal, or ours naming the loader."""
    import pytest
    from sentence_transformers import SentenceTransformer

    from sts_lightning.embeddings.errors import ConfigError

    target = save_export(tmp_path / "out", FMT, {"n": 1}, {"x": torch.zeros(1)})
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        SentenceTransformer(str(target), device="cpu")
    with pytest.raises(ConfigError) as err:
        SentenceTransformer(str(target), device="cpu", trust_remote_code=True)
    assert str(err.value) == (f"{target} cannot be loaded by sentence-transformers: it is a test export "
                              "(sts-lightning/test), scored by its own scorer on the encoder it was fitted on "
                              f"(test_config.json); load it with sts_lightning.load({str(target)!r}) (pip install "
                              "sts-lightning), or score it with the evaluate.py line of its LOADING.md")
