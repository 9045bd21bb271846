"""train(cfg) end to end on the tiny BERT and tiny NLI/STS files: fit, checkpoint, resume, export, errors.

One short run (2 optimizer steps) is shared by the module; everything else uses ``fast_dev_run``.
"""

from __future__ import annotations

import shutil

import pytest
import torch
from hydra.errors import ConfigCompositionException

from sts_lightning.embeddings.errors import ConfigError
from tests.helpers import NLI_ROWS, compose_train_config
from tests.tolerance import TINY_BERT


def test_train_runs_logs_and_checkpoints(trained):
    _, metrics, out = trained
    assert torch.isfinite(torch.tensor(metrics["train/loss"]))
    assert 0.0 <= metrics["train/acc"] <= 1.0
    assert "val/stsb-dev_spearman" in metrics
    assert (out / "checkpoints" / "last.ckpt").is_file()
    assert "train/loss" in (out / "csv" / "metrics.csv").read_text()


def test_checkpoint_loads_with_weights_only(trained):
    from sts_lightning.lightning_modules.sbert_nli import SBERTNLIModule

    _, _, out = trained
    ckpt = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu")
    assert ckpt["global_step"] == 2
    hp = ckpt["hyper_parameters"]
    assert hp["pooling"] == "mean" and hp["lr"] == 2e-5 and hp["max_length"] == 32
    assert all(v is None or isinstance(v, (str, int, float, bool)) for v in hp.values())
    model = SBERTNLIModule.load_from_checkpoint(out / "checkpoints" / "last.ckpt", map_location="cpu")
    assert torch.equal(model.classifier.weight, ckpt["state_dict"]["classifier.weight"])


def test_export_loads_in_transformers_and_sentence_transformers(trained, tiny_model_dir):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    from sts_lightning.lightning_modules.sbert_nli import SBERTNLIModule

    _, _, out = trained
    export = out / "export"
    assert (export / "model.safetensors").is_file()
    hf = AutoModel.from_pretrained(export)
    ours = SBERTNLIModule.load_from_checkpoint(out / "checkpoints" / "last.ckpt", map_location="cpu")
    key = "embeddings.word_embeddings.weight"
    assert torch.allclose(hf.state_dict()[key], ours.encoder_model.state_dict()[key])
    ours.eval()
    sentences = ["a man plays a guitar .", "a dog runs in the park ."]
    expected = ours.scorer().represent(sentences)["embedding"]
    st = SentenceTransformer(str(export), device="cpu")
    got = torch.as_tensor(st.encode(sentences, convert_to_numpy=True))
    torch.testing.assert_close(got, expected, **TINY_BERT)


def test_resume_from_last_continues_the_step_count(trained, tiny_model_dir, run_data_dir):
    from sts_lightning.runs.train_run import train

    cfg, _, out = trained
    resumed = out.parent / "resumed"
    shutil.copytree(out / "checkpoints", resumed / "checkpoints")
    cfg2 = compose_train_config(resumed, tiny_model_dir, run_data_dir, ["+trainer.limit_train_batches=2", "trainer.max_epochs=2",
                                                                   "ckpt_path=last", "export=false"])
    train(cfg2)
    assert torch.load(resumed / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 4


def test_every_trainable_parameter_gets_a_gradient(tiny_model_dir):
    """What DDP needs without find_unused_parameters (BERT's unused pooler is frozen)."""
    from sts_lightning.lightning_modules.sbert_nli import SBERTNLIModule

    model = SBERTNLIModule(str(tiny_model_dir), max_length=32)
    batch = {"sentences1": [r[0] for r in NLI_ROWS[:3]], "sentences2": [r[1] for r in NLI_ROWS[:3]],
             "labels": torch.tensor([0, 1, 2])}
    model.training_step(batch, 0).backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing
    assert model.embed(["a dog ."]).requires_grad and model.embed(["a dog ."]).shape == (1, 32)


def test_nan_loss_stops_with_clear_error(tmp_path, tiny_model_dir, train_data_dir, monkeypatch):
    import sts_lightning.lightning_modules.sbert_nli as sbert_nli
    from sts_lightning.runs.train_run import train

    real = sbert_nli.sbert_nli_loss
    monkeypatch.setattr(sbert_nli, "sbert_nli_loss", lambda logits, labels: real(logits, labels) * float("nan"))
    cfg = compose_train_config(tmp_path, tiny_model_dir, train_data_dir, ["+trainer.fast_dev_run=true"])
    with pytest.raises(FloatingPointError, match="training loss is nan at global step 0"):
        train(cfg)


def test_unknown_config_key_is_a_clear_hydra_error(tmp_path, tiny_model_dir, train_data_dir):
    with pytest.raises(ConfigCompositionException, match="model.lrr"):
        compose_train_config(tmp_path, tiny_model_dir, train_data_dir, ["model.lrr=0.1"])


@pytest.mark.parametrize(("override", "message"), [
    ("model.optimizer=sgd", "unknown optimizer 'sgd'"),
    ("model.pooling=meen", "unknown pooling 'meen'"),
    ("ckpt_path=/no/such.ckpt", "is not a file"),
    ("+model.temprature=0.1", r"^model: .*unexpected keyword argument 'temprature'$"),  # past runs/overrides.py
])
def test_bad_values_raise_config_error(tmp_path, tiny_model_dir, train_data_dir, override, message):
    from sts_lightning.runs.train_run import train

    cfg = compose_train_config(tmp_path, tiny_model_dir, train_data_dir, [override, "+trainer.fast_dev_run=true"])
    with pytest.raises(ConfigError, match=message):
        train(cfg)


@pytest.mark.parametrize("override", [
    "model=sbert_nli", "data=nli", "data=sentences", "trainer=cpu", "trainer=gpu", "trainer=ddp",
    "logger=csv", "logger=wandb", "logger=wandb_offline", "experiment=sbert_nli/minilm_l6",
])
def test_every_config_composes(tmp_path, tiny_model_dir, train_data_dir, override):
    cfg = compose_train_config(tmp_path, tiny_model_dir, train_data_dir, [override])
    assert cfg.model._target_ and cfg.data._target_ and cfg.trainer._target_
    if override == "trainer=ddp":
        assert cfg.trainer.strategy == "ddp" and cfg.trainer.devices == "auto"


def test_sentences_datamodule_from_config(tmp_path, tiny_model_dir, train_data_dir):
    from hydra.utils import instantiate

    cfg = compose_train_config(tmp_path, tiny_model_dir, train_data_dir, ["data=sentences", f"data.cache_dir={tmp_path / 'cache'}"])
    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    assert len(batch["sentences"]) == 4


def test_experiment_runs_fast_dev_run(tmp_path, tiny_model_dir, train_data_dir):
    from sts_lightning.runs.train_run import train

    cfg = compose_train_config(tmp_path, tiny_model_dir, train_data_dir, ["experiment=sbert_nli/minilm_l6",
                                                          "+trainer.fast_dev_run=true", "export=false"])
    assert str(cfg.model.model_name_or_path) == str(tiny_model_dir)  # the command line wins
    assert "train/loss" in train(cfg)


def test_wandb_offline_logger_writes_locally(tmp_path, tiny_model_dir, train_data_dir, monkeypatch):
    from sts_lightning.runs.train_run import train

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = compose_train_config(tmp_path, tiny_model_dir, train_data_dir, ["logger=wandb_offline", "trainer.max_steps=1",
                                                          "export=false", "~callbacks.model_checkpoint"])
    train(cfg)
    import wandb

    wandb.finish()
    wandb.teardown()  # else the offline mode outlives the env var in this process
    assert list(tmp_path.rglob("offline-run-*")), "no offline run directory written"
