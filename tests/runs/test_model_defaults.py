"""``python train.py model=<name>`` works with its defaults: every configs/model file brings its data group, and a
run stopped by ``trainer.max_steps`` mid-epoch still ends scored (final val/ metric, best checkpoint,
before/after table) and exported. The models are the declared trained methods (``embeddings.methods.registry``),
never listed by hand, and each model file agrees with its declaration (data group, LightningModule).
"""

from __future__ import annotations

import re

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from sts_lightning.embeddings.methods.registry import method
from tests.method_cases import model_names, tiny_overrides
from tests.paths import CONFIG_DIR
from tests.runs.test_train import _cfg

MODELS = model_names()


def yaml_data_group(model: str, config_dir=CONFIG_DIR) -> str:
    """The ``override /data: <group>`` entry of a model file's defaults list."""
    spec = yaml.safe_load((config_dir / "model" / f"{model}.yaml").read_text())
    for entry in spec.get("defaults", []):
        if isinstance(entry, dict):
            for key, value in entry.items():
                if re.fullmatch(r"override\s+/data", key):
                    return value
    raise AssertionError(f"configs/model/{model}.yaml selects no data group (defaults: - override /data: ...)")


def _compose(overrides, searchpath: str | None = None):
    """``train`` composed; ``searchpath``: a further config folder (a planted method's model file)."""
    extra = [f"hydra.searchpath=[file://{searchpath}]"] if searchpath else []
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=[*overrides, *extra, "paths.data_dir=/data"])


def test_every_model_file_is_a_declared_method():
    assert sorted(p.stem for p in (CONFIG_DIR / "model").glob("*.yaml")) == sorted(MODELS)


def check_model_file(model: str, config_dir=CONFIG_DIR) -> None:
    """The model file selects the declared data group and builds the declared LightningModule, with nothing unset."""
    declared = method(model)
    group = yaml_data_group(model, config_dir)
    assert group == declared.data, f"configs/model/{model}.yaml brings data={group}, its declaration says {declared.data}"
    searchpath = None if config_dir == CONFIG_DIR else str(config_dir)
    cfg = _compose([f"model={model}"], searchpath)
    assert cfg.data._target_ == _compose([f"data={group}"]).data._target_
    assert cfg.model._target_ == declared.module.replace(":", ".")
    missing = [key for key in cfg.data if OmegaConf.is_missing(cfg.data, key)]
    assert not missing, f"model={model} leaves data.{missing} unset (???): it cannot run with its defaults"


@pytest.mark.parametrize("model", MODELS)
def test_model_brings_its_data_group(model):
    check_model_file(model)


@pytest.mark.parametrize("model", MODELS)
def test_model_data_and_trainer_keys_win_over_the_groups_files(model):
    """A model file's ``data:`` / ``trainer:`` / ``callbacks:`` keys merge after the groups' files (defaults order)."""
    spec = yaml.safe_load((CONFIG_DIR / "model" / f"{model}.yaml").read_text())
    cfg = _compose([f"model={model}"])
    def leaves(node, prefix=()):
        for key, value in node.items():
            yield from leaves(value, (*prefix, key)) if isinstance(value, dict) else [((*prefix, key), value)]

    for group in ("data", "trainer", "callbacks"):
        for path, value in leaves(spec.get(group) or {}):
            composed = OmegaConf.select(cfg[group], ".".join(path))
            if isinstance(value, str) and "${" in value:
                continue  # an interpolation: resolved elsewhere
            plain = OmegaConf.to_object(composed) if OmegaConf.is_config(composed) else composed
            assert plain == value, f"model={model}: {group}.{'.'.join(path)} lost"
    if spec.get("trainer"):
        assert _compose([f"model={model}", "trainer=gpu"]).trainer.accelerator == "gpu"


def test_command_line_data_wins_over_the_model_default():
    assert _compose(["model=ct", "data=nli"]).data._target_.endswith("NLIDataModule")


@pytest.mark.parametrize("model", MODELS)
def test_model_defaults_run_and_end_scored(model, tmp_path, tiny_model_dir, train_data_dir, one_thread):  # noqa: F811
    from sts_lightning.runs.train_run import train

    tiny = [f"model={model}", *tiny_overrides(model, method(model).data, tiny_model_dir, tmp_path),
            "trainer.max_steps=3", "callbacks.sts_evaluation.tasks=[stsb-dev]"]
    run = tmp_path / "run"
    cfg = _cfg(run, tiny_model_dir, train_data_dir, tiny)
    metrics = train(cfg)
    assert "val/stsb-dev_spearman" in metrics, metrics
    assert (run / "sts_before_after.md").is_file()
    assert list((run / "checkpoints").glob("best-step3.ckpt")), list((run / "checkpoints").iterdir())
    assert (run / "export").is_dir() and any((run / "export").iterdir())
