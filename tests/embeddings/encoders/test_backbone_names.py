"""A backbone name that cannot load here is refused by name alone, the packaged names listed closest first."""

from __future__ import annotations

import pytest

from sts_lightning.embeddings.encoders.backbone_names import backbone_problem


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    return tmp_path


def test_a_typo_names_the_closest_packaged_model_first(hub_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    problem = backbone_problem("model.model_name_or_path", "all-MiniLM-L6-v3")
    assert problem.startswith("unknown backbone model.model_name_or_path='all-MiniLM-L6-v3'; "
                              "did you mean 'all-MiniLM-L6-v2'? (")
    assert "closest first: all-MiniLM-L6-v2, paraphrase-MiniLM-L3-v2," in problem
    # online, a hub id (owner/name) or a bare name close to nothing packaged goes to the hub
    assert backbone_problem("k", "sentence-transformers/paraphrase-MiniLM-L6-v2") is None
    assert backbone_problem("k", "bert-base-uncased") is None


def test_offline_any_name_that_is_nowhere_here_is_refused(hub_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "HF_HUB_OFFLINE is set" in backbone_problem("k", "bert-base-uncased")
    assert "HF_HUB_OFFLINE is set" in backbone_problem("k", "sentence-transformers/foo")
    (hub_cache / "models--sentence-transformers--foo").mkdir()  # downloaded earlier: loads offline
    assert backbone_problem("k", "sentence-transformers/foo") is None
    for fine in ("all-MiniLM-L6-v2", "glove", "sentence-transformers/all-MiniLM-L6-v2", str(tmp_path), None, 3):
        assert backbone_problem("k", fine) is None
    assert backbone_problem("k", "multilingual-e5-small", also=("multilingual-e5-small",)) is None
