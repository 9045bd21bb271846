"""Scorers are discovered from the method folders (issue 17: adding a method touches its own folder only)."""

from __future__ import annotations

import sys

import pytest

from embeddings.errors import ConfigError
from embeddings.methods import method_modules
from embeddings.scoring import registry


def test_every_method_module_is_found_with_pooling_first():
    modules = method_modules()
    assert modules[0] == "embeddings.methods.pooling"
    assert {"embeddings.methods.flow", "embeddings.methods.latte_mix", "embeddings.methods.meta",
            "embeddings.methods.sbert_wk", "embeddings.methods.sen2pro",
            "embeddings.methods.whitening"} <= set(modules)
    assert list(registry.SCORER_CLASSES)[:6] == ["cls", "mean", "max", "first_last_avg", "last2_avg", "last3_avg"]


def test_a_new_method_folder_declares_its_scorer_and_the_registry_finds_it(tmp_path, monkeypatch):
    (tmp_path / "toy_method.py").write_text('SCORERS = {"toy": "toy_method:ToyScorer"}\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "method_modules", lambda: [*method_modules(), "toy_method"])
    assert registry.method_scorers()["toy"] == "toy_method:ToyScorer"
    (tmp_path / "clash_method.py").write_text('SCORERS = {"mean": "clash_method:Other"}\n')
    monkeypatch.setattr(registry, "method_modules", lambda: [*method_modules(), "clash_method"])
    with pytest.raises(ConfigError, match="declared twice"):
        registry.method_scorers()
    sys.modules.pop("toy_method", None)
    sys.modules.pop("clash_method", None)
