"""``debug=<name>`` (configs/debug) wins over the model, the experiment and train.yaml, and each one runs.

Why: a debug config that an experiment silently overrides (its ``max_steps: 5000``, its ``val_check_interval``)
would turn a one-minute check into an hour; one that composes but fails on the first step wastes the check.
Every debug file is composed with every model and with a long experiment, and run on the tiny fixtures.
"""

from __future__ import annotations

import time

import pytest
import torch
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tests.helpers import chosen_groups
from tests.helpers import compose_train_config as _cfg
from tests.method_cases import model_names, tiny_overrides
from tests.paths import CONFIG_DIR

DEBUGS = sorted(p.stem for p in (CONFIG_DIR / "debug").glob("*.yaml"))
MODELS = model_names()


def _leaves(node: dict, prefix: tuple = ()):
    for key, value in node.items():
        yield from _leaves(value, (*prefix, key)) if isinstance(value, dict) else [((*prefix, key), value)]


def _compose(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=[*overrides, "paths.data_dir=/data"])


def test_the_debug_group_offers_fast_limit_and_overfit():
    assert {"fast", "limit", "overfit"} <= set(DEBUGS)


@pytest.mark.parametrize("debug", DEBUGS)
@pytest.mark.parametrize("base", [*(f"model={m}" for m in MODELS), "experiment=ct/minilm_l3",
                                  "experiment=sed/meta_minilm_l3"])
def test_debug_keys_win(base, debug):
    """Every key of the debug file is what the composed config holds (ct/minilm_l3 sets 5000 steps, every 500)."""
    cfg = _compose([base, f"debug={debug}"])
    spec = yaml.safe_load((CONFIG_DIR / "debug" / f"{debug}.yaml").read_text())
    for path, value in _leaves(spec):
        composed = OmegaConf.select(cfg, ".".join(path), throw_on_resolution_failure=False)
        if isinstance(value, str) and "${" in value:  # an interpolation: compare what it resolves to
            value = OmegaConf.select(cfg, value[2:-1])
        assert composed == value, (base, debug, path, composed, value)


def test_no_debug_by_default():
    cfg = _compose(["experiment=ct/minilm_l3"])
    assert "fast_dev_run" not in cfg.trainer and cfg.trainer.max_steps == 5000 and cfg.export is True


def _debug_run(tmp_path, model_dir, data_dir, model: str, debug: str, extra=()) -> tuple[dict, float]:
    from sts_lightning.runs.train_run import train

    overrides = [f"model={model}", f"debug={debug}", *extra]
    cfg = _cfg(tmp_path / "run", model_dir, data_dir, [*overrides, *tiny_overrides(*chosen_groups(overrides), model_dir, tmp_path)])
    start = time.perf_counter()
    metrics = train(cfg)
    return metrics, time.perf_counter() - start


@pytest.mark.parametrize("model", MODELS)
def test_fast_runs_one_step_and_leaves_nothing_behind(model, tmp_path, tiny_model_dir, train_data_dir):  # noqa: F811
    metrics, seconds = _debug_run(tmp_path, tiny_model_dir, train_data_dir, model, "fast")
    assert "val/stsb-dev_spearman" in metrics
    assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values()), metrics
    run = tmp_path / "run"
    assert not (run / "export").exists()
    assert not list(run.glob("checkpoints/*.ckpt")), list(run.glob("checkpoints/*"))
    assert seconds < 120, f"debug=fast took {seconds:.0f} s on the tiny model"


def test_limit_writes_what_a_real_run_writes(tmp_path, tiny_model_dir, train_data_dir):  # noqa: F811
    metrics, _ = _debug_run(tmp_path, tiny_model_dir, train_data_dir, "sbert_nli", "limit")
    run = tmp_path / "run"
    assert "val/stsb-dev_spearman" in metrics
    assert (run / "checkpoints" / "last.ckpt").is_file() and list(run.glob("checkpoints/best-step*.ckpt"))
    assert (run / "export").is_dir() and (run / "sts_before_after.md").is_file()


def test_overfit_trains_the_same_batches_and_scores_at_the_end(tmp_path, tiny_model_dir, train_data_dir):  # noqa: F811
    metrics, _ = _debug_run(tmp_path, tiny_model_dir, train_data_dir, "ct", "overfit", ["trainer.max_epochs=3"])
    assert "val/stsb-dev_spearman" in metrics and torch.isfinite(torch.tensor(metrics["train/loss"]))
    assert not (tmp_path / "run" / "export").exists()
