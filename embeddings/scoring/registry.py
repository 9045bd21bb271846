"""Scorers by name, built from plain config values; the names come from the methods' declarations.

A scorer spec is a name (``"mean"``) or a mapping ``{name: sbert_wk, label: wk_paper, variant: paper}``
whose extra keys override the per-scorer defaults. Unknown names, unknown option keys, a missing
required option (``path`` of an export scorer) and a value a scorer class refuses in its ``check_options`` (the
prompt scorer's template) raise a one-line ``ConfigError`` that names the scorer and the option, instead of a
``TypeError`` from a constructor.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.methods.pooling import POOLINGS
from sts_lightning.embeddings.methods.registry import encoder_free_scorers, scorer_classes
from sts_lightning.embeddings.scoring.scorer import Scorer

# name -> "module:Class", from every method's declaration (``embeddings.methods.registry``); the classes are
# imported when built, so a method's dependencies load only when used.
SCORER_CLASSES: dict[str, str] = scorer_classes()

# Scorers that bring their own sentence sources: usable with ``encoders=[none]`` in evaluate.py.
ENCODER_FREE = encoder_free_scorers()


def _split_spec(spec: str | Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    if isinstance(spec, str):
        return spec, spec, {}
    spec = dict(spec)
    if "name" not in spec:
        raise ConfigError(f"scorer spec {spec} has no 'name' key")
    name = str(spec.pop("name"))
    label = str(spec.pop("label", name))
    return name, label, spec


def check_scorer_spec(spec: str | Mapping[str, Any], defaults: Mapping[str, Mapping[str, Any]] | None = None,
                      ) -> tuple[str, str, type, dict[str, Any]]:
    """``(name, label, class, options)`` of a spec, or one ``ConfigError`` line: an unknown name, an unknown option, a
    missing required one. Builds nothing, so ``evaluate`` checks every spec before any model or data loads."""
    name, label, overrides = _split_spec(spec)
    if name not in SCORER_CLASSES:
        raise unknown_choice("scorer", name, SCORER_CLASSES)
    module_name, class_name = SCORER_CLASSES[name].split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    options = {**dict((defaults or {}).get(name, {}) or {}), **overrides}
    if name in POOLINGS:
        options["pooling"] = name
    parameters = {k: p for k, p in inspect.signature(cls.__init__).parameters.items() if k not in ("self", "encoder")}
    unknown = set(options) - set(parameters)
    if unknown:
        raise ConfigError(f"scorer {name!r}: unknown option(s) {sorted(unknown)}; valid: {sorted(parameters)}")
    missing = [k for k in required_options(cls) if k not in options]
    if missing:
        raise ConfigError(missing_options_message(name, missing))
    if callable(getattr(cls, "check_options", None)):  # a scorer's own values (the prompt scorer's template)
        cls.check_options(options)
    return name, label, cls, options


def build_scorer(spec: str | Mapping[str, Any], encoder: BaseEncoder | None,
                 defaults: Mapping[str, Mapping[str, Any]] | None = None) -> Scorer:
    """Instantiate the scorer ``spec`` on ``encoder``.

    Args:
        spec: scorer name or mapping with ``name`` (+ optional ``label`` and option overrides).
        encoder: the encoder it scores with (``None`` for the encoder-free scorers).
        defaults: per-scorer default options (``scorer_options`` in the config).
    """
    name, label, cls, options = check_scorer_spec(spec, defaults)
    if encoder is None and name not in ENCODER_FREE:
        raise ConfigError(f"scorer {name!r} needs an encoder (encoders=[none] suits only {sorted(ENCODER_FREE)})")
    scorer = cls(encoder, **options)
    scorer.name = label
    return scorer


def required_options(cls: type) -> list[str]:
    """The options a scorer class cannot do without: ``__init__`` parameters (but ``encoder``) with no default."""
    return [k for k, p in inspect.signature(cls.__init__).parameters.items()
            if k not in ("self", "encoder") and p.default is inspect.Parameter.empty
            and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]


def missing_options_message(name: str, missing: list[str]) -> str:
    """``scorer 'flow' needs option path: scorers=[{name:flow,path:<path>}]``: what is missing and how to give it."""
    example = ",".join([f"name:{name}", *(f"{k}:<{k}>" for k in missing)])
    return (f"scorer {name!r} needs option{'s' if len(missing) > 1 else ''} {', '.join(missing)}: "
            f"scorers=[{{{example}}}] (evaluate.py) or build_scorer({{'name': {name!r}, "
            f"{', '.join(f'{k!r}: ...' for k in missing)}}}, encoder)")
