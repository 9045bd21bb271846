"""The allowed values of the constructors' arguments: the names many methods share here, each method's own in its
declaration (``MethodDeclaration.rules`` / ``choices``), one table for the constructors and the config check.

Why one table: a constructor and ``runs.config_checks`` (before torch loads) check ``model.<name>`` alike. A name
means one kind of value in every method, so a method that gives a shared name another rule is refused. No torch.
"""

from __future__ import annotations

from collections.abc import Mapping

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods import registry
from sts_lightning.embeddings.methods.rules import (
    POSITIVE,
    POSITIVE_INT,
    PROBABILITY,
    WEIGHT,
    Rule,
    check_choice,
    check_value,
)

__all__ = ["MODEL_RULES", "POSITIVE", "POSITIVE_INT", "PROBABILITY", "Rule", "check_args", "check_choice",
           "check_value", "model_choices", "model_rules"]

MODEL_RULES: dict[str, Rule] = {  # the names many methods share
    "lr": POSITIVE,
    "weight_decay": WEIGHT,
    "warmup_ratio": PROBABILITY,
    "max_length": Rule(int, 1, nullable=True),
    "eval_batch_size": POSITIVE_INT,
    "mini_batch_size": Rule(int, 1, nullable=True),  # whether it divides the per-device batch: runs.config_checks
    "scale": POSITIVE,        # cosine x scale of an in-batch or ranking loss
    "temperature": POSITIVE,  # of an InfoNCE loss
}


def model_rules() -> dict[str, Rule]:
    """The shared rules plus every declared method's own; a name given two different rules is refused."""
    return _merged(MODEL_RULES, "rules")


def model_choices() -> dict[str, tuple[str, ...]]:
    """Every declared method's named options (``model.<name>`` -> the names it takes)."""
    return _merged({}, "choices")


def _merged(shared: Mapping, field: str) -> dict:
    merged, owner = dict(shared), dict.fromkeys(shared, "lightning_modules.arg_rules")
    for declared in registry.methods():
        for name, value in getattr(declared, field).items():
            if name in merged and merged[name] != value:
                raise ConfigError(f"method {declared.name!r} gives model.{name} another meaning than "
                                  f"{owner[name]}: a name means one kind of value in every method")
            merged[name], owner[name] = value, owner.get(name, f"method {declared.name!r}")
    return merged


def check_args(values: Mapping[str, object]) -> None:
    """Check a constructor's arguments by their rules (named ``model.<name>``, as the config says them)."""
    rules, choices = model_rules(), model_choices()
    for name, value in values.items():
        if name in choices:
            check_choice(f"model.{name}", value, choices[name])
        else:
            check_value(f"model.{name}", value, rules[name])
