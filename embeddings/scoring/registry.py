"""Scorers by name, built from plain config values; the names come from the methods' declarations.

A scorer spec is a name (``"mean"``) or a mapping ``{name: <scorer>, label: <label>, <option>: <value>}`` whose
extra keys override the per-scorer defaults. A bad spec is one ``ConfigError`` line, not a constructor's ``TypeError``.
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

# name -> "module:Class"; imported when built, so a method's dependencies load only when used.
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
    if callable(getattr(cls, "check_options", None)):  # a scorer's own values (e.g. a template)
        cls.check_options(options)
    return name, label, cls, options


def _option_text(value: Any) -> str:
    """A value as the command line writes it: ``true``, ``0.5``, ``[1,2]``."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_option_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{_option_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def distinct_labels(specs: list[str | Mapping[str, Any]]) -> list[str]:
    """Each spec's row label: its ``label``, else its name, with the options that tell two unlabelled variants of one
    scorer apart (``x(denoise=true)``): rows labelled alike would collapse in every table, chart and W&B key."""
    parts = [_split_spec(spec) for spec in specs]
    explicit = [not isinstance(spec, str) and "label" in spec for spec in specs]
    labels = []
    for i, (name, label, options) in enumerate(parts):
        same = [o for j, (n, _, o) in enumerate(parts) if j != i and n == name and not explicit[j]]
        if explicit[i] or not same:
            labels.append(label)
            continue
        missing = object()
        differ = [k for k, v in options.items() if any(o.get(k, missing) != v for o in same)]
        labels.append(f"{name}({','.join(f'{k}={_option_text(options[k])}' for k in differ)})" if differ else name)
    seen: dict[str, int] = {}
    for i, label in enumerate(labels):
        if label in seen:
            raise ConfigError(f"scorers {seen[label] + 1} and {i + 1} would both be labelled {label!r}: give one a "
                              f"label, e.g. {{name:{parts[i][0]},label:{label}_2,...}}")
        seen[label] = i
    return labels


def build_scorer(spec: str | Mapping[str, Any], encoder: BaseEncoder | None,
                 defaults: Mapping[str, Mapping[str, Any]] | None = None) -> Scorer:
    """Instantiate the scorer ``spec`` on ``encoder``; ``defaults`` are ``scorer_options``."""
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
    """``scorer 'x' needs option path: scorers=[{name:x,path:<path>}]``: what is missing and how to give it."""
    example = ",".join([f"name:{name}", *(f"{k}:<{k}>" for k in missing)])
    return (f"scorer {name!r} needs option{'s' if len(missing) > 1 else ''} {', '.join(missing)}: "
            f"scorers=[{{{example}}}] (evaluate.py) or build_scorer({{'name': {name!r}, "
            f"{', '.join(f'{k!r}: ...' for k in missing)}}}, encoder)")
