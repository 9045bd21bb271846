"""benchmarks/tools/bench_models.py: sizes build once from their seed; engine options parse as Python literals."""

from __future__ import annotations

import pytest

from benchmarks.tools.bench_models import SIZES, parse_kwargs, sized_model
from sts_lightning.embeddings.errors import ConfigError


def test_parse_kwargs_reads_literals_booleans_and_strings():
    assert parse_kwargs("") == {} and parse_kwargs(None) == {}
    assert parse_kwargs("max_tokens=8192, packed=true,mode=flex,scale=0.5,x=None") == {
        "max_tokens": 8192, "packed": True, "mode": "flex", "scale": 0.5, "x": None}
    with pytest.raises(ConfigError, match="key=value"):
        parse_kwargs("packed")


def test_a_size_is_built_from_its_seed_once_and_reused(tmp_path):
    from transformers import AutoConfig

    path = sized_model("tiny", tmp_path)
    config = AutoConfig.from_pretrained(path)
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == SIZES["tiny"]
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert sized_model("tiny", tmp_path) == path and (path / "model.safetensors").stat().st_mtime_ns == stamp
    assert SIZES["bert-base"] == (12, 768, 12) and SIZES["minilm-l6"] == (6, 384, 12)
    with pytest.raises(ConfigError, match="bert-base"):
        sized_model("huge", tmp_path)
