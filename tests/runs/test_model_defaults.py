"""``python train.py model=<name>`` works with its defaults: every configs/model file brings its data group, and a
run stopped by ``trainer.max_steps`` mid-epoch still ends scored (final val/ metric, best checkpoint,
before/after table) and exported. The models are the declared trained methods (``embeddings.methods.registry``),
never listed by hand, and each model file agrees with its declaration (data group, LightningModule).

Defaults once: a model file departs from its constructor's signature (``runs/constructor_defaults.py``, tested
in ``tests/runs/test_constructor_defaults.py``), so ``XModule()`` in Python trains what ``python train.py model=<name>``
trains; within the code, a subclass restates no default of its base (below).
"""

from __future__ import annotations

import inspect

import pytest
import yaml
from omegaconf import OmegaConf

from tests.helpers import compose_train
from tests.method_cases import (
    check_model_file,
    constructor_defaults,
    model_names,
    target_class,
)
from tests.paths import CONFIG_DIR

MODELS = model_names()


def test_every_model_file_is_a_declared_method():
    assert sorted(p.stem for p in (CONFIG_DIR / "model").glob("*.yaml")) == sorted(MODELS)


@pytest.mark.parametrize("model", MODELS)
def test_model_brings_its_data_group(model):
    check_model_file(model)


@pytest.mark.parametrize("model", MODELS)
def test_model_data_and_trainer_keys_win_over_the_groups_files(model):
    """A model file's ``data:`` / ``trainer:`` / ``callbacks:`` keys merge after the groups' files (defaults order)."""
    spec = yaml.safe_load((CONFIG_DIR / "model" / f"{model}.yaml").read_text())
    cfg = compose_train([f"model={model}"])
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
        assert compose_train([f"model={model}", "trainer=gpu"]).trainer.accelerator == "gpu"


def test_command_line_data_wins_over_the_model_default():
    assert compose_train(["model=ct", "data=nli"]).data._target_.endswith("NLIDataModule")


@pytest.mark.parametrize("model", MODELS)
def test_model_defaults_run_and_end_scored(model, method_run):
    """The session's 3-step run of ``model=<model>`` with its defaults (``tests/runs/conftest.py``)."""
    metrics, run = method_run(model)
    assert "val/stsb-dev_spearman" in metrics, metrics
    assert (run / "sts_before_after.md").is_file()
    assert list((run / "checkpoints").glob("best-step3.ckpt")), list((run / "checkpoints").iterdir())
    assert (run / "export").is_dir() and any((run / "export").iterdir())


def test_a_subclass_names_a_base_argument_only_to_change_its_default():
    """``**base`` carries the base's arguments; restating one with the base's own default would write it twice."""
    from sts_lightning.lightning_modules.base import EncoderModule

    base = constructor_defaults(EncoderModule)
    for cls in {target_class(model) for model in MODELS}:
        if not issubclass(cls, EncoderModule):
            continue
        own = inspect.signature(cls.__dict__["__init__"]).parameters
        assert any(p.kind == p.VAR_KEYWORD for p in own.values()), f"{cls.__name__} does not pass **base on"
        restated = [n for n, p in own.items() if n in base and p.default == base[n]]
        assert not restated, f"{cls.__name__} restates EncoderModule's defaults of {restated}"
