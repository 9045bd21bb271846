"""Every experiment file and every option of every config group runs ``fast_dev_run`` on the tiny model.

Why: a config that only composes can still fail at instantiation or on the first step (a renamed
argument, a wrong interpolation, a scheduler that needs a key the method lacks); this catches it on CPU
in seconds instead of on a GPU box. Each run keeps its file's settings and swaps in only what the tiny
fixtures need: the model directory, the data directory and its sources, small batches, and
``trainer.accelerator=cpu`` / ``devices=1`` for the GPU groups (bf16-mixed autocast runs on CPU).
"""

from __future__ import annotations

import pytest
import torch
from hydra import compose, initialize_config_dir

from tests.helpers import compose_train_config as _cfg
from tests.helpers import experiment_names
from tests.paths import CONFIG_DIR

# Pipelines chain several trainings: tests/runs/test_pipeline.py runs one with tiny stages.
EXPERIMENTS = [name for name in experiment_names() if not name.startswith("pipeline/")]
# What the tiny fixtures offer each data group (the real files are far too big for a unit test).
TINY_DATA = {"nli": ["data.sources=[snli:dev,snli:test,sick:trial]"],
             "scored_pairs": ["data.sources=[stsb:train,sick:trial]", "data.batch_size=4"],
             "sentences": ["data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8"],
             "cached_embeddings": ["data.files=[wiki/wiki_sentences_100k.txt]"],
             "token_states": ["data.files=[nli:snli:dev]"],
             "distillation": ["data.files=[wiki/wiki_sentences_100k.txt]"],
             "source_views": ["data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8"]}
TINY_MODEL = {"ct": ["model.pairs=8", "model.positives=2"],
              "latte_mix": ["model.latent_dim=4", "model.num_classes=5", "model.hidden_dim=16"],
              "whitening": ["model.k=8"]}  # recipes keep k=256 columns; the tiny BERT has 32
COMMON = ["+trainer.fast_dev_run=true", "export=false", "callbacks.sts_evaluation.tasks=[stsb-dev]"]


def _groups(overrides: list[str]) -> tuple[str, str]:
    """(model group, data group) a set of overrides selects: Hydra's own record of the chosen config files.

    Why not a class-name map: a new method needs only its config files; the choices name them directly.
    """
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[*overrides, "paths.data_dir=/data"], return_hydra_config=True)
    choices = cfg.hydra.runtime.choices
    return str(choices["model"]), str(choices["data"])


def tiny_overrides(model: str, data: str, model_dir, tmp_path) -> list[str]:
    """What the tiny fixtures need for a model / data group pair (small nets, tiny files, a private cache)."""
    tiny = [*TINY_DATA[data], *TINY_MODEL.get(model, [])]
    if data == "distillation":  # the tiny model teaches itself (teachers must share its size)
        tiny.append(f"data.teachers=[{model_dir}]")
    if data == "source_views":  # two tiny sources of the same model: mean and CLS pooling
        tiny.append(f"data.sources=[{model_dir},{{model:{model_dir},pooling:cls}}]")
    if data not in ("nli", "scored_pairs"):  # the datamodules with a cache
        tiny.append(f"data.cache_dir={tmp_path / 'cache'}")
    return tiny


def _fast_dev_run(tmp_path, model_dir, data_dir, overrides: list[str]) -> dict[str, float]:
    from sts_lightning.runs.train_run import train

    model, data = _groups(overrides)
    tiny = [f"data={data}", *tiny_overrides(model, data, model_dir, tmp_path)]
    cfg = _cfg(tmp_path / "run", model_dir, data_dir, [*overrides, *tiny, *COMMON])
    metrics = train(cfg)
    assert metrics and all(torch.isfinite(torch.tensor(v)) for v in metrics.values()), metrics
    return metrics


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_fast_dev_run(name, tmp_path, tiny_model_dir, train_data_dir):  # noqa: F811
    metrics = _fast_dev_run(tmp_path, tiny_model_dir, train_data_dir, [f"experiment={name}"])
    assert "val/stsb-dev_spearman" in metrics


OPTIONS = [
    ["model=sbert_nli", "data=nli"],
    ["model=ct", "data=sentences"],
    ["model=flow", "data=cached_embeddings"],
    ["model=sbert_nli", "model.optimizer=rmsprop", "model.scheduler=constant"],
    ["model=sbert_nli", "model.objective=mnrl", "data.format=triplets"],
    ["model=sbert_nli", "model.objective=mnrl", "data.format=triplets", "model.mini_batch_size=2",
     "trainer.precision=bf16-mixed"],
    ["model=ct", "data=sentences", "model.scheduler=linear", "model.optimizer=adamw"],
    ["model=ct", "data=sentences", "model.objective=in_batch", "model.dropout=true"],
    ["model=ct", "data=sentences", "model.objective=in_batch", "model.dropout=true", "model.mini_batch_size=4",
     "model.gradient_checkpointing=true"],
    ["model=ct", "data=sentences", "model.gradient_checkpointing=true"],
    ["model=flow", "data=cached_embeddings", "model.coupling=additive", "model.permutation=reverse"],
    ["model=latte_mix", "data=token_states"],
    ["model=whitening", "data=cached_embeddings"],
    ["model=whitening", "data=cached_embeddings", "model.k=null", "model.pooling=mean"],
    ["model=latte_mix", "data=token_states", "model.latent=normal", "model.encoder_layers=2"],
    ["model=latte_mix", "data=token_states", "model.latent=ae", "data.dtype=float16"],
    ["model=ct", "data=sentences", "model.views=halves"],
    ["model=ct", "data=sentences", "model.views=mixed_halves", "model.objective=in_batch", "model.length_groups=2"],
    ["model=ct", "data=sentences", "model.views=halves", "model.embedding_lr=1e-3", "model.frozen_layers=0"],
    ["model=ct", "data=sentences", "model.views=mixed_halves", "model.objective=in_batch", "model.optimizer=adamw",
     "model.trainable=word_embeddings", "model.scheduler=constant"],
    ["model=cosent", "data=scored_pairs"],
    ["model=cosent", "model.objective=angle"],
    ["model=cosent", "model.objective=cosine", "model.optimizer=rmsprop", "model.scheduler=constant"],
    ["model=sed", "data=distillation"],
    ["model=sed", "data=distillation", "model.eval_layers=3"],
    ["model=sed", "data=distillation", "model.gradient_checkpointing=true"],
    ["model=cross_view_ae", "data=source_views"],
    ["model=cross_view_ae", "data=source_views", "model.loss=cos2", "model.hidden_layers=1"],
    ["model=simcse", "data=sentences"],
    ["model=simcse", "data=sentences", "model.pooling=mean", "model.mlp=none"],
    ["model=simcse_sup", "data=nli"],
    ["model=simcse", "data=nli", "data.format=triplets", "model.objective=supervised", "model.mlp=always",
     "model.hard_negative_weight=1.0"],
    ["trainer=gpu", "trainer.accelerator=cpu"],
    ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=1"],
    ["logger=csv"],
    ["logger=wandb_offline"],
    ["logger=wandb"],  # online config; WANDB_MODE=offline below keeps it off the network
]


@pytest.mark.parametrize("overrides", OPTIONS, ids=[" ".join(o) for o in OPTIONS])
def test_config_option_fast_dev_run(overrides, tmp_path, tiny_model_dir, train_data_dir, monkeypatch):  # noqa: F811
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    _fast_dev_run(tmp_path, tiny_model_dir, train_data_dir, overrides)
    if any(o.startswith("logger=wandb") for o in overrides):
        import wandb

        wandb.finish()
        wandb.teardown()  # else the offline mode outlives the env var in this process
