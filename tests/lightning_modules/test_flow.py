"""BERT-flow on the tiny BERT: feature cache (built once, rebuilt when stale), NLL goes down, train(cfg),
export round-trip, configs compose."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

import sts_lightning.datamodules.cached_embeddings as cached
from sts_lightning.datamodules.cached_embeddings import CachedEmbeddingDataModule
from tests.helpers import WORDS
from tests.paths import CONFIG_DIR

SENTENCES = ["a man plays a guitar .", "a dog runs in the park .", "a woman cuts an onion .",
             "two children kick a ball ."]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def flow_data_dir(tmp_path_factory, tiny_data_dir) -> Path:
    """The tiny STS files plus a 40-line wiki file (one blank line, which is skipped)."""
    import shutil

    root = tmp_path_factory.mktemp("flow_data") / "data"
    shutil.copytree(tiny_data_dir, root)
    (root / "wiki").mkdir()
    lines = [" ".join(WORDS[(3 * i + j) % len(WORDS)] for j in range(6)) for i in range(40)]
    (root / "wiki" / "wiki_sentences_100k.txt").write_text("\n".join(lines[:20] + [""] + lines[20:]) + "\n")
    return root


def _dm(model_dir, data_dir, cache, **kw) -> CachedEmbeddingDataModule:
    return CachedEmbeddingDataModule(data_dir=str(data_dir), files=["wiki/wiki_sentences_100k.txt"],
                                     model_name_or_path=str(model_dir), max_length=32, batch_size=8,
                                     cache_dir=str(cache), encode_device="cpu", chunk_size=16, **kw)


@pytest.fixture()
def count_encodes(monkeypatch):
    calls = []
    real = cached.load_encoder

    def load(*args, **kwargs):
        encoder = real(*args, **kwargs)
        encode = encoder.encode
        encoder.encode = lambda sentences, *a, **k: calls.append(len(sentences)) or encode(sentences, *a, **k)
        return encoder

    monkeypatch.setattr(cached, "load_encoder", load)
    return calls


def test_cache_is_built_once_and_matches_the_encoder(tmp_path, tiny_model_dir, flow_data_dir, count_encodes):
    from sts_lightning.embeddings.encoders.load import load_encoder
    from sts_lightning.embeddings.methods.pooling import get_pooling

    dm = _dm(tiny_model_dir, flow_data_dir, tmp_path)
    dm.prepare_data()
    assert sum(count_encodes) == 40 and len(count_encodes) == 3  # chunks of 16: the blank line skipped
    dm.prepare_data()
    _dm(tiny_model_dir, flow_data_dir, tmp_path).prepare_data()  # a new run, same key
    assert sum(count_encodes) == 40
    dm.setup("fit")
    feats = dm.dataset.tensors[0]
    assert feats.shape == (40, 32) and feats.dtype == torch.float32 and dm.embedding_dim == 32
    lines = [s for s in (flow_data_dir / "wiki" / "wiki_sentences_100k.txt").read_text().splitlines() if s]
    expected = load_encoder(str(tiny_model_dir), max_length=32).encode(lines[:5], get_pooling("first_last_avg"))
    assert torch.allclose(feats[:5], expected, atol=1e-6)
    batch = next(iter(dm.train_dataloader()))
    assert isinstance(batch, list) and batch[0].shape == (8, 32)


def test_truncated_or_mismatched_cache_is_rebuilt(tmp_path, tiny_model_dir, flow_data_dir, count_encodes, caplog):
    dm = _dm(tiny_model_dir, flow_data_dir, tmp_path)
    dm.prepare_data()
    path = dm.cache_path()
    path.write_bytes(path.read_bytes()[:-100])  # truncated
    dm.prepare_data()
    assert sum(count_encodes) == 80 and "not usable" in caplog.text
    meta = json.loads(path.with_suffix(".json").read_text())
    meta["key"]["pooling"] = "mean"  # a sidecar describing other features under this name
    path.with_suffix(".json").write_text(json.dumps(meta))
    dm.prepare_data()
    assert sum(count_encodes) == 120
    dm.setup("fit")
    assert dm.dataset.tensors[0].shape == (40, 32)
    _dm(tiny_model_dir, flow_data_dir, tmp_path, max_sentences=10).prepare_data()  # another key: new cache
    assert sum(count_encodes) == 130


def test_changed_sentence_file_is_rebuilt(tmp_path, tiny_model_dir, flow_data_dir, count_encodes):
    data = tmp_path / "data"
    (data / "wiki").mkdir(parents=True)
    text = (flow_data_dir / "wiki" / "wiki_sentences_100k.txt").read_text()
    (data / "wiki" / "wiki_sentences_100k.txt").write_text(text)
    dm = _dm(tiny_model_dir, data, tmp_path / "cache")
    dm.prepare_data()
    first = dm.cache_path()
    (data / "wiki" / "wiki_sentences_100k.txt").write_text(text + "a red car .\n")
    dm.prepare_data()
    assert dm.cache_path() != first and sum(count_encodes) == 81
    with pytest.raises(Exception, match="not usable"):
        _dm(tiny_model_dir, data, tmp_path / "other").setup("fit")  # setup never encodes


@pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)`")
def test_nll_decreases_on_cached_features(tmp_path, tiny_model_dir, flow_data_dir):
    from sts_lightning.lightning_modules.flow import BertFlowModule

    dm = _dm(tiny_model_dir, flow_data_dir, tmp_path)
    dm.prepare_data()
    dm.setup("fit")
    x = dm.dataset.tensors[0].clone()
    torch.manual_seed(0)
    module = BertFlowModule(str(tiny_model_dir), max_length=32)
    assert module.flow.dim == 32 and module.hparams.embedding_dim == 32
    optimizer = module.configure_optimizers()
    module.train()
    losses = []
    for step in range(30):
        loss = module.training_step([x], step)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert module.flow.initialized and all(np.isfinite(losses))
    assert losses[-1] < losses[0] - 0.1, losses
    assert sum(b < a for a, b in zip(losses[:-1], losses[1:], strict=True)) >= 25, losses  # full batch: (nearly) monotone


def _cfg(out: Path, model_dir: Path, data_dir: Path, overrides=()):
    base = ["model=flow", "data=cached_embeddings", f"model.model_name_or_path={model_dir}", "model.max_length=32",
            "model.eval_batch_size=8", f"paths.data_dir={data_dir}", "data.batch_size=8",
            f"data.cache_dir={out / 'cache'}", "callbacks.sts_evaluation.batch_size=8",
            "trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false"]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[*base, *overrides])
    with open_dict(cfg):
        cfg.output_dir = str(out)
    return cfg


def test_train_export_and_load_flow_scorer(tmp_path, tiny_model_dir, flow_data_dir):
    from sts_lightning.embeddings.methods.flow.scorer import load_flow_scorer
    from sts_lightning.lightning_modules.flow import BertFlowModule
    from sts_lightning.runs.train_run import train

    cfg = _cfg(tmp_path, tiny_model_dir, flow_data_dir, ["+trainer.limit_train_batches=3"])
    assert cfg.data.pooling == "first_last_avg" and cfg.data.model_name_or_path == str(tiny_model_dir)
    metrics = train(cfg)
    assert np.isfinite(metrics["train/loss"]) and "val/stsb-dev_spearman" in metrics
    ckpt = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu")
    assert ckpt["global_step"] == 3 and not any(k.startswith("_encoder") for k in ckpt["state_dict"])
    module = BertFlowModule.load_from_checkpoint(tmp_path / "checkpoints" / "last.ckpt", map_location="cpu")
    module.eval()
    export = tmp_path / "export"
    assert (export / "flow.safetensors").is_file()
    assert json.loads((export / "flow_config.json").read_text())["pooling"] == "first_last_avg"
    scorer = load_flow_scorer(export)
    pairs = (SENTENCES[:2] + SENTENCES[:1], SENTENCES[2:] + SENTENCES[1:2])
    expected = module.scorer().score_pairs(*pairs)
    got = scorer.score_pairs(*pairs)
    assert torch.allclose(got, expected, atol=1e-6) and not torch.allclose(got, torch.ones(3))
    z = scorer.represent(SENTENCES)["embedding"]
    assert z.shape == (4, 32) and torch.isfinite(z).all()
    # the flow changed the representation: z is not the pooled vector
    pooled = scorer.encoder.encode(SENTENCES, scorer.pool_fn)
    assert not torch.allclose(z, pooled, atol=1e-3)


def test_mismatched_encoder_settings_and_bad_dim_are_config_errors(tmp_path, tiny_model_dir, flow_data_dir):
    from sts_lightning.embeddings.errors import ConfigError
    from sts_lightning.lightning_modules.flow import BertFlowModule
    from sts_lightning.runs.train_run import train

    with pytest.raises(ConfigError, match="multiple of 2\\*\\*levels"):
        BertFlowModule(str(tiny_model_dir), levels=6)
    cfg = _cfg(tmp_path, tiny_model_dir, flow_data_dir, ["data.pooling=mean", "+trainer.fast_dev_run=true",
                                                         "export=false"])
    with pytest.raises(ConfigError, match="another encoder setting"):
        train(cfg)


@pytest.mark.parametrize("override", ["experiment=flow/minilm_l6", "model.coupling=additive"])
def test_flow_configs_compose(tmp_path, tiny_model_dir, flow_data_dir, override):
    cfg = _cfg(tmp_path, tiny_model_dir, flow_data_dir, [override])
    assert cfg.model._target_ == "sts_lightning.lightning_modules.flow.BertFlowModule"
    assert cfg.data._target_ == "sts_lightning.datamodules.cached_embeddings.CachedEmbeddingDataModule"
    assert cfg.model.lr == 1e-3 and cfg.trainer.max_epochs == 1 and cfg.data.pooling == cfg.model.pooling
    assert str(cfg.data.model_name_or_path) == str(tiny_model_dir)  # the command line wins
