"""Every experiment file composes with train.yaml (a broken experiment fails here, not on a GPU box)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tests.paths import CONFIG_DIR

EXPERIMENTS = sorted(p.stem for p in (CONFIG_DIR / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_composes(name):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[f"experiment={name}", "paths.data_dir=/data"])
    model = OmegaConf.to_container(cfg.model, resolve=False)
    assert "_target_" in model and "_target_" in cfg.data and "_target_" in cfg.trainer
