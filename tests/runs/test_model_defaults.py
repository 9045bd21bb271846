"""``python train.py model=<name>`` works with its defaults: every configs/model file brings its data group, and a
run stopped by ``trainer.max_steps`` mid-epoch still ends scored (final val/ metric, best checkpoint,
before/after table) and exported. Models are discovered from configs/model/*.yaml, never listed by hand.
"""

from __future__ import annotations

import re

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tests.helpers import compose_train_config as _cfg
from tests.paths import CONFIG_DIR
from tests.runs.test_fast_dev_run import tiny_overrides

MODELS = sorted(p.stem for p in (CONFIG_DIR / "model").glob("*.yaml"))


def data_group_of(model: str) -> str:
    """The ``override /data: <group>`` entry of a model file's defaults list."""
    spec = yaml.safe_load((CONFIG_DIR / "model" / f"{model}.yaml").read_text())
    for entry in spec.get("defaults", []):
        if isinstance(entry, dict):
            for key, value in entry.items():
                if re.fullmatch(r"override\s+/data", key):
                    return value
    raise AssertionError(f"configs/model/{model}.yaml selects no data group (defaults: - override /data: ...)")


def _compose(overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=[*overrides, "paths.data_dir=/data"])


@pytest.mark.parametrize("model", MODELS)
def test_model_brings_its_data_group(model):
    group = data_group_of(model)
    cfg = _compose([f"model={model}"])
    assert cfg.data._target_ == _compose([f"data={group}"]).data._target_
    assert cfg.model._target_
    missing = [key for key in cfg.data if OmegaConf.is_missing(cfg.data, key)]
    assert not missing, f"model={model} leaves data.{missing} unset (???): it cannot run with its defaults"


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

    tiny = [f"model={model}", *tiny_overrides(model, data_group_of(model), tiny_model_dir, tmp_path),
            "trainer.max_steps=3", "callbacks.sts_evaluation.tasks=[stsb-dev]"]
    run = tmp_path / "run"
    cfg = _cfg(run, tiny_model_dir, train_data_dir, tiny)
    metrics = train(cfg)
    assert "val/stsb-dev_spearman" in metrics, metrics
    assert (run / "sts_before_after.md").is_file()
    assert list((run / "checkpoints").glob("best-step3.ckpt")), list((run / "checkpoints").iterdir())
    assert (run / "export").is_dir() and any((run / "export").iterdir())
