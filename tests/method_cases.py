"""The method-generic tests' cases, generated from the methods' declarations (``embeddings.methods.registry``).

Why here: the model-default, fast_dev_run, export round-trip, model-card and DDP tests all parametrize over the
trained methods and swap in each method's tiny settings (``MethodDeclaration.tiny``); reading both from the
declarations means a new method is tested by all of them with no list to extend (``test_planted_method.py``
plants one to show it). Functions, not constants, so a planted declaration is seen when they are called.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from sts_lightning.embeddings import methods as package
from sts_lightning.embeddings.methods import registry
from sts_lightning.embeddings.methods.declaration import MethodDeclaration
from sts_lightning.embeddings.methods.registry import method, trained_methods


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
