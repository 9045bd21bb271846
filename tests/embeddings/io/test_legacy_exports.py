"""Exports written by the pre-issue-17 layout still load and score identically (issue 17 "outputs unchanged").

Why: the format tag in each export (``flow_config.json``, ``token_vae_config.json``, ``meta_config.json``, or a
sentence-transformers directory) is the contract, not the module paths that wrote it. The folders under
``tests/fixtures/exports_v0`` were written once by the old code (see its README); each is loaded here the way
its ``LOADING.md`` says and must give the vectors the old code scored, to 1e-5.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.helpers import EXPORT_SENTENCES, assert_same_representation, documented_scorer
from tests.paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "exports_v0"
NAMES = sorted(p.stem.split(".")[0] for p in FIXTURES.glob("*.expected.safetensors"))


def _copy_with_encoder_path(name: str, tmp_path: Path) -> Path:
    encoder = tmp_path / "tiny_bert"
    if not encoder.exists():
        shutil.copytree(FIXTURES / "tiny_bert", encoder)
    folder = shutil.copytree(FIXTURES / name, tmp_path / name)
    for path in folder.iterdir():
        if path.suffix in {".json", ".md"}:
            path.write_text(path.read_text().replace("@TINY_BERT@", str(encoder)))
    return folder


def test_every_exporting_model_has_a_stored_export():
    assert NAMES == ["cross_view_ae", "ct", "flow", "sbert_nli", "sed", "token_vae"]


@pytest.mark.parametrize("name", NAMES)
def test_old_export_scores_as_it_did(name, tmp_path, one_thread):
    scorer, _ = documented_scorer(_copy_with_encoder_path(name, tmp_path))
    with torch.no_grad():
        assert_same_representation(scorer.represent(EXPORT_SENTENCES), load_file(str(FIXTURES / f"{name}.expected.safetensors")))
