"""The method-generic tests' cases, generated from the methods' declarations (``embeddings.methods.registry``).

Why here: the model-default, fast_dev_run, export round-trip, model-card and DDP tests all parametrize over the
trained methods and swap in each method's tiny settings (``MethodDeclaration.tiny``); reading both from the
declarations means a new method is tested by all of them with no list to extend (``test_planted_method.py``
plants one to show it). Functions, not constants, so a planted declaration is seen when they are called.
Here too: the check that a method's model file agrees with its declaration, and its constructor's defaults, which
the model-default, argument-rule and planted-method tests share.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from sts_lightning.embeddings import methods as package
from sts_lightning.embeddings.methods import registry
from sts_lightning.embeddings.methods.declaration import MethodDeclaration
from sts_lightning.embeddings.methods.pooling import POOLINGS
from sts_lightning.embeddings.methods.registry import method, trained_methods
from tests.helpers import compose_train
from tests.paths import CONFIG_DIR


def model_names() -> list[str]:
    """Every ``train.py model=<name>``, in listing order."""
    return [m.name for m in trained_methods()]


def st_export_names() -> set[str]:
    """The methods whose export is a sentence-transformers directory."""
    return {m.name for m in trained_methods() if m.st_export}


def _declaring(data: str) -> MethodDeclaration:
    """The first method whose data group is ``data``: its tiny data settings serve any method run on that group."""
    for declared in trained_methods():
        if declared.data == data:
            return declared
    raise AssertionError(f"no method declares data group {data!r}, so no tiny settings for it")


def tiny_overrides(model: str, data: str, model_dir, tmp_path) -> list[str]:
    """What the tiny fixtures need for a model / data group pair: the model's tiny data settings where it runs on
    its own group, else those of a method of that group, then its tiny model settings."""
    tiny = method(model).tiny
    if method(model).data != data:
        tiny = replace(tiny, data=_declaring(data).tiny.data)
    return tiny.overrides(model_dir, tmp_path / "cache")


def fast_dev_run_options() -> list[list[str]]:
    """``model=<name>`` alone, then with each of its declared option sets."""
    return [[f"model={m.name}", *options] for m in trained_methods() for options in ((), *m.tiny.options)]


def ddp_cases() -> dict[str, tuple[str, tuple[str, ...]]]:
    """``{case id: (method, extra overrides)}`` of the 2-rank DDP test (``ct``, ``ct_cached``, ...)."""
    return {f"{m.name}{suffix}": (m.name, extra) for m in trained_methods() for suffix, extra in m.tiny.ddp.items()}


def export_cases(extra: tuple[str, ...] = ()) -> list:
    """(method, option overrides) for every trained method; each ``eval_layers`` / ``pooling`` its config offers
    (``extra``: further compose overrides, e.g. a planted method's ``hydra.searchpath``)."""
    cases = []
    for name in model_names():
        model = compose_train([f"model={name}", *extra]).model
        cases.append(pytest.param(name, {}, id=name))
        if "eval_layers" in model:
            cases += [pytest.param(name, {"eval_layers": k}, id=f"{name}-eval_layers{k}") for k in (1, 2, 3)]
        if model.get("pooling") is not None:  # SED's is None: derived from eval_layers
            cases += [pytest.param(name, {"pooling": p}, id=f"{name}-{p}") for p in POOLINGS if p != model.pooling]
    return cases


# A method's model file and its constructor (test_model_defaults.py, test_arg_rules.py, test_planted_method.py).


def yaml_data_group(model: str, config_dir=CONFIG_DIR) -> str:
    """The ``override /data: <group>`` entry of a model file's defaults list."""
    spec = yaml.safe_load((config_dir / "model" / f"{model}.yaml").read_text())
    for entry in spec.get("defaults", []):
        if isinstance(entry, dict):
            for key, value in entry.items():
                if re.fullmatch(r"override\s+/data", key):
                    return value
    raise AssertionError(f"configs/model/{model}.yaml selects no data group (defaults: - override /data: ...)")


def target_class(model: str) -> type:
    module, name = compose_train([f"model={model}"]).model._target_.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def constructor_defaults(cls: type) -> dict:
    """Every keyword the constructor takes with the default it applies: a subclass's ``**base`` reaches its bases'
    arguments, so their signatures are merged, the subclass's own defaults winning."""
    merged = {}
    for klass in reversed(cls.__mro__):
        init = klass.__dict__.get("__init__")
        if init is None or klass.__module__.startswith(("lightning", "torch", "builtins")):
            continue
        for param in inspect.signature(init).parameters.values():
            if param.kind not in (param.VAR_KEYWORD, param.VAR_POSITIONAL) and param.name != "self":
                merged[param.name] = param.default
    return merged


def check_model_file(model: str, config_dir=CONFIG_DIR) -> None:
    """The model file selects the declared data group and builds the declared LightningModule, with nothing unset."""
    declared = method(model)
    group = yaml_data_group(model, config_dir)
    assert group == declared.data, f"configs/model/{model}.yaml brings data={group}, its declaration says {declared.data}"
    searchpath = None if config_dir == CONFIG_DIR else str(config_dir)
    cfg = compose_train([f"model={model}"], searchpath)
    assert cfg.data._target_ == compose_train([f"data={group}"]).data._target_
    assert cfg.model._target_ == declared.module.replace(":", ".")
    missing = [key for key in cfg.data if OmegaConf.is_missing(cfg.data, key)]
    assert not missing, f"model={model} leaves data.{missing} unset (???): it cannot run with its defaults"


@contextmanager
def planted_method(folder: Path, name: str, declaration: str) -> Iterator[None]:
    """``folder/<name>/__init__.py`` holding ``declaration`` (Python source) as a method package for the duration:
    ``folder`` joins the methods package's search path, so the registry finds it as it finds a real folder."""
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text(declaration)
    package.__path__.append(str(folder))
    registry.methods.cache_clear()
    try:
        yield
    finally:
        package.__path__.remove(str(folder))
        sys.modules.pop(f"{registry.PACKAGE}.{name}", None)
        registry.methods.cache_clear()
