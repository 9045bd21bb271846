"""The allowed range of every number a method's constructor takes, written once for both places that check it.

Why one table: the constructors check their arguments (a Python user gets the same one-line ``ConfigError`` as
``train.py``), and ``runs.config_checks`` checks the composed config before torch is imported; both read
``MODEL_RULES`` (the config check as ``model.<name>``), so a range cannot be written twice and drift. A rule is
keyed by argument name, so a name means one kind of number in every method (CT's ``dropout`` is a switch and
SimCSE's a probability: SimCSE checks its own). Relations between arguments (``final_lr <= lr``) stay in the
constructor that has them. No torch here: the entry points import this before torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.methods.rankcse import CONSISTENCY, RANKING_LOSSES


class Rule(NamedTuple):
    kind: type              # int or float
    low: float              # smallest allowed value (inclusive unless low_open)
    high: float = math.inf  # largest allowed value (inclusive unless high_open)
    low_open: bool = False
    high_open: bool = False
    nullable: bool = False  # None allowed (e.g. max_length: the model's own)
    also: tuple = ()        # extra allowed values outside the range (e.g. -1 = unlimited)
    each: bool = False      # a non-empty list of such numbers (e.g. RankCSE's teacher_weights), checked item by item

    def describe(self) -> str:
        what = "an integer" if self.kind is int else "a number"
        lo = f"> {self.low:g}" if self.low_open else f">= {self.low:g}"
        hi = "" if math.isinf(self.high) else (f" and < {self.high:g}" if self.high_open else f" and <= {self.high:g}")
        extra = "".join(f" or {v}" for v in self.also) + (" or null" if self.nullable else "")
        return f"{what} {lo}{hi}{extra}"

    def allows(self, value: object) -> bool:
        if (value is None and self.nullable) or (not isinstance(value, bool) and value in self.also):
            return True
        number = _as_number(value, self.kind)
        return number is not None and (number > self.low if self.low_open else number >= self.low) and \
            (number < self.high if self.high_open else number <= self.high)


def _as_number(value: object, kind: type) -> float | None:
    """``value`` as a float if it is a number of ``kind`` (an int is a float too; a bool or a string is neither)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if kind is int and not isinstance(value, int):
        return None
    return float(value) if math.isfinite(value) else None


def check_value(key: str, value: object, rule: Rule) -> None:
    """One ``ConfigError`` line naming ``key`` and what ``rule`` allows, unless ``value`` is allowed.

    A list rule (``each``) names the offending item: ``model.teacher_weights[1]=0``.
    """
    if rule.each and not (value is None and rule.nullable):
        if not isinstance(value, Sequence) or isinstance(value, str) or not len(value):
            raise ConfigError(f"{key}={value!r} is not allowed: it must be a non-empty list, each item "
                              f"{rule._replace(each=False, nullable=False).describe()}" + (", or null" if rule.nullable else ""))
        for i, item in enumerate(value):
            check_value(f"{key}[{i}]", item, rule._replace(each=False, nullable=False))
        return
    if not rule.allows(value):
        raise ConfigError(f"{key}={value!r} is not allowed: it must be {rule.describe()}")


POSITIVE_INT = Rule(int, 1)
POSITIVE = Rule(float, 0, low_open=True)
PROBABILITY = Rule(float, 0, 1, high_open=True)

MODEL_RULES: dict[str, Rule] = {
    "lr": POSITIVE,
    "weight_decay": Rule(float, 0),
    "warmup_ratio": PROBABILITY,
    "max_length": Rule(int, 1, nullable=True),
    "eval_batch_size": POSITIVE_INT,
    "mini_batch_size": Rule(int, 1, nullable=True),  # whether it divides the per-device batch: runs.config_checks
    "scale": POSITIVE,                                 # cosine x scale (mnrl, in-batch CT, cosent / angle)
    "temperature": POSITIVE,                           # SimCSE
    "embedding_lr": Rule(float, 0, low_open=True, nullable=True),  # CT
    "length_groups": POSITIVE_INT,                     # CT
    "tau": POSITIVE,                                   # Latte-Mix
    "score_tau": Rule(float, 0, low_open=True, nullable=True),
    "min_lr": POSITIVE,
    "beta_warmup_ratio": Rule(float, 0, 1, low_open=True),
    "mlm_probability": Rule(float, 0, 1, low_open=True),  # MLM: share of the tokens predicted
    **{f"{term}_w": Rule(float, 0) for term in ("cosine", "ibn", "angle")},  # AnglE's full objective (cosent)
    **{f"{term}_tau": POSITIVE for term in ("cosine", "ibn", "angle")},
    "teacher_weights": Rule(float, 0, low_open=True, nullable=True, each=True),  # RankCSE: one per teacher
    "teacher_temperature": POSITIVE,                   # RankCSE's tau2
    "rank_temperature": Rule(float, 0, low_open=True, nullable=True),  # RankCSE: the student list's
    "distillation_weight": Rule(float, 0),             # RankCSE: 0 turns the term off
    "consistency_weight": Rule(float, 0),
    "lambda_weight": Rule(float, 0),                      # DiffCSE: weight of the replaced-token detection loss
    "masking_ratio": Rule(float, 0, 1, low_open=True, high_open=True),  # DiffCSE: share of the tokens the generator edits
}


# Options that take one of a few names, checked by the constructors and, as ``model.<name>``, before torch loads.
MODEL_CHOICES: dict[str, tuple[str, ...]] = {
    "ranking_loss": RANKING_LOSSES,  # RankCSE
    "consistency": CONSISTENCY,      # RankCSE
}


def check_choice(key: str, value: object, choices: tuple[str, ...]) -> None:
    """One ``ConfigError`` line naming ``key`` and the valid names, unless ``value`` is one."""
    if value not in choices:
        raise unknown_choice(key, value, choices)


def check_args(values: Mapping[str, object]) -> None:
    """Check a constructor's arguments that ``MODEL_RULES`` names (as ``model.<name>``, as the config says them)."""
    for name, value in values.items():
        check_value(f"model.{name}", value, MODEL_RULES[name])
