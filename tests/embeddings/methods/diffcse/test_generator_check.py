"""``generator_problem``: what cannot be DiffCSE's generator, said in one line before torch loads."""

from __future__ import annotations

import json

import pytest

from sts_lightning.embeddings.methods.diffcse.generator_check import generator_problem


def test_a_masked_lm_directory_passes(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertForMaskedLM"]}))
    assert generator_problem("model.generator", str(tmp_path)) is None


@pytest.mark.parametrize(("name", "message"), [
    (None, "model.generator=None must name a masked LM"),
    ("all-MiniLM-L6-v2", "is a packaged sentence encoder, which has no MLM head"),
    ("all-MiniLM-L6-v3", "model.generator='all-MiniLM-L6-v3' cannot load here"),
])
def test_names_that_cannot_be_a_generator(name, message, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    problem = generator_problem("model.generator", name)
    assert problem is not None and message in problem and "\n" not in problem


def test_a_directory_without_an_mlm_head_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))
    assert "has no MLM head (config.json: architectures ['BertModel'])" in generator_problem("model.generator",
                                                                                          str(tmp_path))
    (tmp_path / "config.json").unlink()
    assert "without config.json" in generator_problem("model.generator", str(tmp_path))
