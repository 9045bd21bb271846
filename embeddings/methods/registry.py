"""Every method's declaration, discovered: the one list of methods the code, the tests and the README read.

Discovered, not listed, so adding a method is its folder (or a ``<name>_method`` module). No torch here (``--help``
and the config checks read it).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from functools import cache

from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.methods.declaration import MethodDeclaration, ScorerGroup

PACKAGE = "sts_lightning.embeddings.methods"
MODULE_SUFFIX = "_method"
FIRST = "pooling"  # the baselines lead every listing


def declaration_modules() -> list[str]:
    """Dotted names of the modules that may hold declarations, ``pooling`` first, then alphabetical."""
    package = importlib.import_module(PACKAGE)
    found = {info.name.removesuffix(MODULE_SUFFIX): info.name for info in pkgutil.iter_modules(package.__path__)
             if info.ispkg or info.name.endswith(MODULE_SUFFIX)}
    return [f"{PACKAGE}.{found[key]}" for key in sorted(found, key=lambda n: (n != FIRST, n))]


@cache
def methods() -> tuple[MethodDeclaration, ...]:
    """Every declared method, in listing order; names, aliases and scorer names checked unique."""
    found: list[MethodDeclaration] = []
    for name in declaration_modules():
        module = importlib.import_module(name)
        single = getattr(module, "METHOD", None)
        for declaration in (single,) if single is not None else tuple(getattr(module, "METHODS", ())):
            if not isinstance(declaration, MethodDeclaration):
                raise ConfigError(f"{name}: METHOD(S) must be MethodDeclaration, not {type(declaration).__name__}")
            found.append(declaration)
    _check_unique([n for m in found for n in (m.name, *m.aliases)], "method name or alias")
    _check_unique([n for m in found for g in m.scorers for n in g.names], "scorer name")
    return tuple(found)


def _check_unique(names: list[str], what: str) -> None:
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"{what} declared twice: {', '.join(twice)}")


def trained_methods() -> tuple[MethodDeclaration, ...]:
    """The methods ``train.py model=<name>`` trains."""
    return tuple(m for m in methods() if m.trained)


def method(name: str) -> MethodDeclaration:
    """The declaration of ``name`` (or of a method ``name`` is an alias of); one ``ConfigError`` line if none."""
    for declared in methods():
        if name == declared.name or name in declared.aliases:
            return declared
    raise unknown_choice("method", name, [m.name for m in methods()])


def method_of(target: object) -> MethodDeclaration | None:
    """The declaration whose LightningModule is ``target`` (``pkg.module.Class`` or ``pkg.module:Class``), if any."""
    wanted = str(target).replace(":", ".")
    return next((m for m in trained_methods() if m.module.replace(":", ".") == wanted), None)


def resolve(reference: str) -> Callable:
    """The function a declaration names as ``"module:function"`` (imported when called for)."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


def aliases() -> dict[str, str]:
    """``{former name: method name}`` (``contrastive_tension`` -> ``ct``)."""
    return {alias: m.name for m in methods() for alias in m.aliases}


def scorer_groups() -> list[ScorerGroup]:
    """Every method's scorers, grouped by class, in listing order (``--help``)."""
    return [group for m in methods() for group in m.scorers]


def scorer_classes() -> dict[str, str]:
    """``{scorer name: "module:Class"}`` of every method (``embeddings.scoring.registry``)."""
    return {name: group.target for group in scorer_groups() for name in group.names}


def encoder_free_scorers() -> frozenset[str]:
    """Scorers that bring their own sentence sources: usable with ``encoders=[none]`` in ``evaluate.py``."""
    return frozenset(name for group in scorer_groups() if group.encoder_free for name in group.names)
