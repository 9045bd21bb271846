"""Every experiment file composes with train.yaml (a broken experiment fails here, not on a GPU box)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tests.helpers import experiment_names
from tests.paths import CONFIG_DIR

EXPERIMENTS = experiment_names()
MODELS = sorted(p.stem for p in (CONFIG_DIR / "model").glob("*.yaml"))
# Folders of configs/experiment that are not a model's: chains of several methods.
NOT_A_METHOD = {"pipeline"}


def _compose(name: str):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=[f"experiment={name}", "paths.data_dir=/data"],
                       return_hydra_config=True)


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_composes(name):
    cfg = _compose(name)
    model = OmegaConf.to_container(cfg.model, resolve=False)
    assert "_target_" in model and "_target_" in cfg.data and "_target_" in cfg.trainer


@pytest.mark.parametrize("name", [n for n in EXPERIMENTS if "/" in n and n.split("/")[0] not in NOT_A_METHOD])
def test_experiment_folder_is_the_model_it_trains(name):
    """configs/experiment/<method>/<recipe>.yaml trains model=<method>: one name per method, on the command line too."""
    assert name.split("/")[0] in MODELS, f"experiment/{name}: its folder names no configs/model file"
    assert _compose(name).hydra.runtime.choices.model == name.split("/")[0]


def test_experiments_live_in_a_method_folder():
    """Only the README's one-liner stays at the top level (``make run`` = ``experiment=quickstart``)."""
    assert [n for n in EXPERIMENTS if "/" not in n] == ["quickstart"]
    assert {n.split("/")[0] for n in EXPERIMENTS if "/" in n} <= {*MODELS, *NOT_A_METHOD}


def test_an_experiment_key_wins_over_train_yaml(tmp_path):
    """``_self_`` comes first in train.yaml: its ``seed: 42`` is a default an experiment can change."""
    import shutil

    configs = shutil.copytree(CONFIG_DIR, tmp_path / "configs")
    (configs / "experiment" / "ct" / "seeded.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /model: ct\nseed: 7\nexport: false\n")
    with initialize_config_dir(config_dir=str(configs), version_base="1.3"):
        cfg = compose(config_name="train", overrides=["experiment=ct/seeded"])
        assert (cfg.seed, cfg.export) == (7, False)
        assert compose(config_name="train", overrides=["experiment=ct/seeded", "seed=3"]).seed == 3
