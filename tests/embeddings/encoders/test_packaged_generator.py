"""The packaged masked LM ``paraphrase-MiniLM-L3-v2-mlm`` (DiffCSE's offline default generator): built once into the
model cache from the data directory's Wikipedia sentences, then handed over without its corpus or a rebuild.

The real base (the ONNX-converted MiniLM-L3) and recipe take minutes: here the base is the tiny model and the recipe
two steps (monkeypatched), the corpus the tiny wiki file; what is tested is the caching and the messages.
"""

from __future__ import annotations

import json

import pytest
import torch

from sts_lightning.embeddings.encoders import packaged as pm
from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.methods.diffcse.generator_check import generator_problem

NAME = "paraphrase-MiniLM-L3-v2-mlm"


@pytest.fixture()
def tiny_generator(tiny_model_dir, train_data_dir, tmp_path, monkeypatch):
    """The packaged generator's builder over the tiny model, a two-step recipe, an empty cache and the tiny data."""
    monkeypatch.setenv("STS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STS_LIGHTNING_CACHE", raising=False)
    monkeypatch.setenv("STS_DATA_DIR", str(train_data_dir))
    monkeypatch.setattr(pm, "_minilm_l3", lambda model: tiny_model_dir)
    monkeypatch.setattr(pm, "GENERATOR_RECIPE", {**pm.GENERATOR_RECIPE, "steps": 2, "batch_size": 8, "heldout": 8})
    return tmp_path / "cache" / "models" / NAME


def test_it_is_a_packaged_masked_lm_with_no_hub_original():
    model = pm.packaged_model(NAME)
    assert model is not None and model.masked_lm and model.kind == "transformer" and pm.hub_id(NAME) is None
    assert [m.name for m in pm.PACKAGED_MODELS.values() if m.masked_lm] == [NAME]


def test_built_once_then_handed_over_without_corpus_or_build(tiny_generator, monkeypatch, one_thread):
    torch.manual_seed(7)
    before = torch.get_rng_state()
    assert generator_problem("model.generator", NAME) is None  # cold, corpus present: fine
    path = pm.resolve_model_path(NAME)
    assert path == str(tiny_generator) and torch.equal(torch.get_rng_state(), before)
    assert json.loads((tiny_generator / "config.json").read_text())["architectures"] == ["BertForMaskedLM"]
    built = (tiny_generator / "model.safetensors").stat().st_mtime_ns
    monkeypatch.setattr(pm, "CONTINUED_MODULE", "no.such.module")  # a rebuild would fail here
    monkeypatch.setenv("STS_DATA_DIR", str(tiny_generator.parent / "no-data"))
    assert pm.resolve_model_path(NAME) == path and (tiny_generator / "model.safetensors").stat().st_mtime_ns == built
    assert generator_problem("model.generator", NAME) is None  # warm: the corpus is no longer needed


def test_a_recipe_change_rebuilds(tiny_generator, monkeypatch, one_thread):
    pm.resolve_model_path(NAME)
    first = (tiny_generator / "mlm_build.json").read_text()
    monkeypatch.setattr(pm, "GENERATOR_RECIPE", {**pm.GENERATOR_RECIPE, "seed": 1})
    pm.resolve_model_path(NAME)
    assert json.loads((tiny_generator / "mlm_build.json").read_text())["recipe"]["seed"] == 1 != json.loads(first)[
        "recipe"]["seed"]


def test_a_missing_corpus_is_one_line_naming_it_before_anything_loads(tiny_generator, tmp_path, monkeypatch):
    monkeypatch.setenv("STS_DATA_DIR", str(tmp_path / "elsewhere"))
    problem = generator_problem("model.generator", NAME)
    expected = str(tmp_path / "elsewhere" / "wiki" / "wiki_sentences_100k.txt")
    assert problem is not None and "\n" not in problem and expected in problem and "STS_DATA_DIR" in problem
    with pytest.raises(DataError, match="needs .*wiki_sentences_100k.txt \\(not found"):
        pm.resolve_model_path(NAME)
    assert not tiny_generator.exists()
    monkeypatch.delenv("STS_DATA_DIR")
    monkeypatch.setattr("sts_lightning.embeddings.io.data_dir.CHECKOUT_DATA_DIR", None)
    assert "none is set: set STS_DATA_DIR=" in generator_problem("model.generator", NAME)
