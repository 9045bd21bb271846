"""``check_fitted_on``: the one check every fitted export runs before it scores (issue 27).

What differs is named (weights, precision, a setting such as pooling), another width is refused even when
``allow_other_encoder`` is set, and an export older than recorded identities loads with a note.
"""

from __future__ import annotations

import logging
import shutil

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.encoder_identity import check_fitted_on, encoder_identity
from tests.paths import ROOT

EXPORT = "BERT-flow export /runs/x/export/flow_config.json"


def test_the_same_encoder_passes_and_its_identity_is_complete(tiny_encoder):
    recorded = encoder_identity(tiny_encoder, "tiny")
    assert recorded["precision"] == "fp32" and recorded["hidden_size"] == 32
    check_fitted_on(recorded, tiny_encoder, EXPORT)


def test_vectors_of_another_precision_are_named_with_the_setting_that_matches(tiny_encoder):
    """A head fitted on features of a bf16 pass: the digest agrees (bf16-rounded), the vectors do not."""
    recorded = encoder_identity(tiny_encoder, "tiny", precision="bf16")
    with pytest.raises(ConfigError) as err:
        check_fitted_on(recorded, tiny_encoder, EXPORT)
    message = str(err.value)
    assert "\n" not in message and message.startswith(EXPORT)
    assert "fitted on bf16 vectors, these are fp32" in message and "encoder.precision=bf16" in message
    assert "other weights" not in message


def test_a_recorded_setting_that_differs_is_named(tiny_encoder):
    recorded = {**encoder_identity(tiny_encoder), "pooling": "cls"}
    check_fitted_on(recorded, tiny_encoder, EXPORT, pooling="cls")
    with pytest.raises(ConfigError, match="pooling 'cls' vs 'mean'"):
        check_fitted_on(recorded, tiny_encoder, EXPORT, pooling="mean")


def test_allow_other_encoder_warns_once_but_never_for_another_width(tiny_encoder, caplog):
    recorded = {**encoder_identity(tiny_encoder, "tiny"), "weights_bf16_sha256": "0" * 64}
    with caplog.at_level(logging.WARNING):
        check_fitted_on(recorded, tiny_encoder, EXPORT, allow_other_encoder=True)
    assert len(caplog.records) == 1 and "other weights" in caplog.text and "scoring anyway" in caplog.text
    with pytest.raises(ConfigError, match="64-d vectors vs 32-d"):
        check_fitted_on({**recorded, "hidden_size": 64}, tiny_encoder, EXPORT, allow_other_encoder=True)


def test_an_export_without_identity_loads_with_a_note(tmp_path, caplog, one_thread):
    """The flow export written before identities were recorded (tests/fixtures/exports_v0) still scores."""
    from sts_lightning.embeddings.encoders.load import load_encoder
    from sts_lightning.embeddings.scoring.registry import build_scorer

    fixtures = ROOT / "tests" / "fixtures" / "exports_v0"
    encoder_dir = shutil.copytree(fixtures / "tiny_bert", tmp_path / "tiny_bert")
    folder = shutil.copytree(fixtures / "flow", tmp_path / "flow")
    config = folder / "flow_config.json"
    config.write_text(config.read_text().replace("@TINY_BERT@", str(encoder_dir)))
    with caplog.at_level(logging.WARNING):
        scorer = build_scorer({"name": "flow", "path": str(folder)}, load_encoder(str(encoder_dir), max_length=32))
    assert "records no encoder identity" in caplog.text and str(config) in caplog.text
    assert torch.isfinite(scorer.represent(["a man plays a guitar ."])["embedding"]).all()
