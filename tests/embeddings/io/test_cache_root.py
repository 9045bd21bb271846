"""``embeddings.io.cache_root``: one cache root (``STS_CACHE_DIR``), the packaged models under it, and the
deprecated ``STS_LIGHTNING_CACHE`` still honoured for the models with one warning."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sts_lightning.embeddings.encoders import packaged
from sts_lightning.embeddings.io import cache_root as cr
from tests.paths import ROOT


@pytest.fixture()
def clean_env(monkeypatch):
    monkeypatch.delenv(cr.CACHE_ENV, raising=False)
    monkeypatch.delenv(cr.LEGACY_MODELS_ENV, raising=False)
    monkeypatch.setattr(cr, "_warned", set())
    return monkeypatch


def test_default_root_and_models_under_it(clean_env):
    assert cr.cache_root() == Path("~/.cache/sts-lightning").expanduser()
    assert packaged.cache_dir() == cr.cache_root() / "models"
    assert cr.cache_dir_or_root(None) == cr.cache_root()
    assert cr.cache_dir_or_root("~/x") == Path("~/x").expanduser()


def test_sts_cache_dir_moves_every_cache(clean_env, tmp_path, caplog):
    clean_env.setenv("STS_CACHE_DIR", str(tmp_path / "root"))
    with caplog.at_level(logging.WARNING):
        assert cr.cache_root() == tmp_path / "root"
        assert packaged.cache_dir() == tmp_path / "root" / "models"
    assert "deprecated" not in caplog.text


def test_legacy_variable_is_honoured_for_models_with_one_warning(clean_env, tmp_path, caplog):
    clean_env.setenv("STS_CACHE_DIR", str(tmp_path / "root"))
    clean_env.setenv("STS_LIGHTNING_CACHE", str(tmp_path / "old"))
    with caplog.at_level(logging.WARNING, logger=cr.__name__):
        assert packaged.cache_dir() == tmp_path / "old" / "models"
        assert packaged.cache_dir() == tmp_path / "old" / "models"
    warnings = [r for r in caplog.records if "STS_LIGHTNING_CACHE is deprecated" in r.getMessage()]
    assert len(warnings) == 1 and "\n" not in warnings[0].getMessage()
    assert cr.cache_root() == tmp_path / "root"  # the other caches follow STS_CACHE_DIR only


def test_no_other_module_reads_a_cache_variable():
    root = ROOT
    readers = sorted(str(p.relative_to(root)) for d in ("embeddings", "datamodules", "sts")
                     for p in (root / d).rglob("*.py")
                     if any(v in p.read_text() for v in ('"STS_CACHE_DIR"', '"STS_LIGHTNING_CACHE"')))
    assert readers == ["embeddings/io/cache_root.py"]
