"""``encoder.precision``: bf16 / fp16 weights, fp32 outputs, clear refusals, cache keys that name it."""

from __future__ import annotations

import logging

import pytest
import torch

from sts_lightning.embeddings.encoders import precision as precision_module
from sts_lightning.embeddings.encoders.precision import key_entry, resolve_precision
from sts_lightning.embeddings.errors import ConfigError
from tests.helpers import token_batch

CPU = torch.device("cpu")


@pytest.fixture()
def native_bf16(monkeypatch):
    monkeypatch.setattr(precision_module, "cpu_has_native_bf16", lambda: True)


def test_names_and_refusals(monkeypatch, caplog):
    assert resolve_precision(None, CPU) == resolve_precision("FP32", CPU) == "fp32"
    with pytest.raises(ConfigError, match="encoder.precision='fp8' is not one of fp32, bf16, fp16"):
        resolve_precision("fp8", CPU)
    with pytest.raises(ConfigError, match="fp16 is not supported on a CPU"):
        resolve_precision("fp16", CPU)
    monkeypatch.setattr(precision_module, "cpu_has_native_bf16", lambda: False)
    with caplog.at_level(logging.WARNING):
        assert resolve_precision("bf16", CPU) == "fp32"  # emulated bf16 would be slower than fp32
    assert "no native bf16" in caplog.text
    monkeypatch.setattr(precision_module, "cpu_has_native_bf16", lambda: True)
    assert resolve_precision("bf16", CPU) == "bf16"


def test_bf16_weights_fp32_outputs_close_to_fp32(native_bf16, tiny_model_dir):
    from sts_lightning.embeddings.encoders.hf import HFEncoder
    from sts_lightning.embeddings.methods.pooling import mean_pool

    sentences = ["a man plays a guitar .", "a woman is slicing an onion .", "the cat sat ."]
    fp32 = HFEncoder.from_pretrained(str(tiny_model_dir), max_length=32)
    bf16 = HFEncoder.from_pretrained(str(tiny_model_dir), max_length=32, precision="bf16")
    assert bf16.precision == "bf16" and next(bf16.model.parameters()).dtype == torch.bfloat16
    batch = token_batch(bf16, sentences)
    assert all(h.dtype == torch.float32 for h in batch.hidden_states)  # pooling and scores stay fp32
    a, b = fp32.encode(sentences, mean_pool), bf16.encode(sentences, mean_pool)
    assert b.dtype == torch.float32
    assert torch.nn.functional.cosine_similarity(a, b).min() > 0.99


def test_caches_of_encoder_outputs_key_on_the_precision(native_bf16, tiny_model_dir, tmp_path):
    from sts_lightning.datamodules.cached_embeddings import CachedEmbeddingDataModule
    from sts_lightning.datamodules.token_state_cache import cache_key
    from sts_lightning.embeddings.sources.sentence_source import EncoderSource

    def features(precision):
        return CachedEmbeddingDataModule(data_dir=str(tmp_path), files=[], model_name_or_path=str(tiny_model_dir),
                                         cache_dir=str(tmp_path), encode_device="cpu", encode_precision=precision)

    fp32_key = features("fp32").cache_key()
    assert "precision" not in fp32_key  # fp32 caches written before precisions existed stay valid
    assert features("bf16").cache_key() == {**fp32_key, "precision": "bf16"}
    assert cache_key("m", 1, 32, "float16", ["a"], "bf16") == {**cache_key("m", 1, 32, "float16", ["a"]),
                                                               "precision": "bf16"}
    source = EncoderSource(str(tiny_model_dir), max_length=32, precision="bf16")
    assert source.fingerprint()["precision"] == "bf16" and source.spec()["precision"] == "bf16"
    assert key_entry("fp32") == {}


def test_evaluate_refuses_fp16_on_a_cpu_before_loading_data(tmp_path, monkeypatch):
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from sts_lightning.runs import evaluate_run
    from tests.paths import CONFIG_DIR

    monkeypatch.setattr(evaluate_run, "load_tasks", lambda *a, **k: pytest.fail("loaded data before the check"))
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=["encoder.precision=fp16", "paths.data_dir=/data"])
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path)
    with pytest.raises(ConfigError, match="fp16 is not supported on a CPU"):
        evaluate_run.evaluate(cfg)
