"""Every fitted export refuses an encoder other than the one it was fitted on (issue 27).

Two tiny random BERTs of the same architecture, width and vocabulary (seeds 0 and 1) stand for
all-MiniLM-L6-v2 and paraphrase-MiniLM-L3-v2: a flow, whitening or token VAE fitted on one scored on the
other gave plausible numbers without a word. Each kind, exported by its real module (or ``sts_lightning.fit_meta``),
must now refuse the other encoder in ONE line naming the export's config file and what differs, score on
it anyway with ``allow_other_encoder: true`` (one warning line), and score on its own encoder (also a copy
of it elsewhere: names never decide) as before.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil

import pytest
import torch

from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.scoring.registry import build_scorer
from sts_lightning.embeddings.sources.build import load_meta_scorer
from sts_lightning.fit_meta import fit_and_export
from sts_lightning.lightning_modules.cross_view_ae import CrossViewAEModule
from sts_lightning.lightning_modules.flow import BertFlowModule
from sts_lightning.lightning_modules.latte_mix import LatteMixModule
from sts_lightning.lightning_modules.whitening import WhiteningModule

pytestmark = pytest.mark.usefixtures("one_thread")
SENTENCES = ["a man plays a guitar .", "a dog runs in the park ."]

# name -> (module builder on a model dir, scorer name, config file)
HEADS = {
    "flow": (lambda m: BertFlowModule(str(m), max_length=32, depth=1, hidden=8), "flow", "flow_config.json"),
    "whitening": (lambda m: WhiteningModule(str(m), max_length=32), "whitening", "whitening_config.json"),
    "latte_mix": (lambda m: LatteMixModule(str(m), max_length=32, latent_dim=4, num_classes=5, hidden_dim=16),
                  "latte_mix", "token_vae_config.json"),
}


@pytest.fixture(scope="module")
def exports(tmp_path_factory, tiny_model_dir) -> dict:
    """Each head kind fitted (built) on the seed-0 BERT and exported once."""
    root = tmp_path_factory.mktemp("fitted")
    return {kind: build(tiny_model_dir).export(root / kind) for kind, (build, _, _) in HEADS.items()}


@pytest.mark.parametrize("kind", sorted(HEADS))
def test_export_records_the_encoder_it_was_fitted_on(kind, exports, tiny_model_dir):
    config = json.loads((exports[kind] / HEADS[kind][2]).read_text())
    recorded = config["encoder"]
    assert recorded["name"] == str(tiny_model_dir) and recorded["hidden_size"] == 32
    assert recorded["precision"] == "fp32" and len(recorded["weights_bf16_sha256"]) == 64
    assert ("pooling" if kind != "latte_mix" else "layer") in config  # what the vectors were taken from


@pytest.mark.parametrize("kind", sorted(HEADS))
def test_another_encoder_is_one_line_naming_the_export_file(kind, exports, other_tiny_model_dir):
    _, name, config_file = HEADS[kind]
    other = load_encoder(str(other_tiny_model_dir), max_length=32)
    with pytest.raises(ConfigError) as err:
        build_scorer({"name": name, "path": str(exports[kind])}, other)
    message = str(err.value)
    assert "\n" not in message
    assert str(exports[kind] / config_file) in message and repr(other_tiny_model_dir.name) in message
    assert "other weights" in message and "allow_other_encoder: true" in message


@pytest.mark.parametrize("kind", sorted(HEADS))
def test_allow_other_encoder_scores_with_one_warning(kind, exports, other_tiny_model_dir, caplog):
    _, name, _ = HEADS[kind]
    other = load_encoder(str(other_tiny_model_dir), max_length=32)
    with caplog.at_level(logging.WARNING):
        scorer = build_scorer({"name": name, "path": str(exports[kind]), "allow_other_encoder": True}, other)
    warnings = [r.getMessage() for r in caplog.records if "allow_other_encoder" in r.getMessage()]
    assert len(warnings) == 1 and "other weights" in warnings[0]
    with torch.no_grad():
        scores = scorer.score_pairs(SENTENCES, SENTENCES[::-1])
    assert torch.isfinite(torch.as_tensor(scores)).all()


@pytest.mark.parametrize("kind", sorted(HEADS))
def test_the_same_weights_elsewhere_are_accepted(kind, exports, tiny_model_dir, tmp_path):
    copy = shutil.copytree(tiny_model_dir, tmp_path / "renamed_copy")
    build_scorer({"name": HEADS[kind][1], "path": str(exports[kind])}, load_encoder(str(copy), max_length=32))


def test_another_width_is_refused_even_when_allowed(exports):
    from sts_lightning.embeddings.encoders.static import StaticWordEncoder

    glove = StaticWordEncoder(["a", "dog"], torch.randn(2, 16), name="tiny-glove")
    with pytest.raises(ConfigError, match="32-d vectors vs 16-d.*no other width"):
        build_scorer({"name": "flow", "path": str(exports["flow"]), "allow_other_encoder": True}, glove)


def test_fit_meta_refuses_a_source_whose_weights_changed(tmp_path, tiny_model_dir, other_tiny_model_dir,
                                                         train_data_dir, caplog):
    """sts_lightning.fit_meta (SVD) records each source; a source directory trained further in place is refused."""
    source = shutil.copytree(tiny_model_dir, tmp_path / "source_bert")
    args = argparse.Namespace(method="svd", sources=str(source),
                              files="wiki/wiki_sentences_100k.txt", data_dir=str(train_data_dir),
                              cache_dir=str(tmp_path / "cache"), max_sentences=30, max_words=59, d=8, tau=10.0,
                              loss="mse", hidden_layers=0, epochs=1, batch_size=16, seed=0, align_to=None,
                              align_mean=False, out=str(tmp_path / "meta"))
    fit_and_export(args)
    recorded = json.loads((tmp_path / "meta" / "meta_config.json").read_text())["source_encoders"]
    assert recorded[0]["pooling"] == "mean" and len(recorded[0]["weights_bf16_sha256"]) == 64
    load_meta_scorer(tmp_path / "meta")  # unchanged: fine
    shutil.copy(other_tiny_model_dir / "model.safetensors", source / "model.safetensors")  # retrained in place
    with pytest.raises(ConfigError) as err:
        build_scorer({"name": "meta", "path": str(tmp_path / "meta")}, None)
    message = str(err.value)
    assert "\n" not in message and "meta_config.json, source 1" in message and "other weights" in message
    with caplog.at_level(logging.WARNING):
        build_scorer({"name": "meta", "path": str(tmp_path / "meta"), "allow_other_encoder": True}, None)
    assert "scoring anyway" in caplog.text


def test_cross_view_ae_export_refuses_a_changed_source(tmp_path, tiny_model_dir, other_tiny_model_dir):
    source = shutil.copytree(tiny_model_dir, tmp_path / "source_bert")
    module = CrossViewAEModule(sources=[str(source), {"model": str(source), "pooling": "cls"}], dims=[32, 32], d=8)
    folder = module.export(tmp_path / "ae")
    recorded = json.loads((folder / "meta_config.json").read_text())["source_encoders"]
    assert [r["pooling"] for r in recorded] == ["mean", "cls"]
    load_meta_scorer(folder)
    shutil.copy(other_tiny_model_dir / "model.safetensors", source / "model.safetensors")
    with pytest.raises(ConfigError, match=r"meta_config\.json, source 1 .*other weights"):
        load_meta_scorer(folder)
