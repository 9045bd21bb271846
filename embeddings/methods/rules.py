"""An argument's allowed values: a number range (``Rule``) or a few names, and the one-line error for others.

Torch-free, so the constructors and ``runs.config_checks`` (before torch loads) check the same rules with one line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from sts_lightning.embeddings.errors import ConfigError, unknown_choice


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
    """One ``ConfigError`` line naming ``key`` and what ``rule`` allows, unless ``value`` is allowed; a list rule
    (``each``) names the offending item (``model.teacher_weights[1]=0``)."""
    if rule.each and not (value is None and rule.nullable):
        if not isinstance(value, Sequence) or isinstance(value, str) or not len(value):
            raise ConfigError(f"{key}={value!r} is not allowed: it must be a non-empty list, each item "
                              f"{rule._replace(each=False, nullable=False).describe()}" + (", or null" if rule.nullable else ""))
        for i, item in enumerate(value):
            check_value(f"{key}[{i}]", item, rule._replace(each=False, nullable=False))
        return
    if not rule.allows(value):
        raise ConfigError(f"{key}={value!r} is not allowed: it must be {rule.describe()}")


def check_choice(key: str, value: object, choices: tuple[str, ...]) -> None:
    """One ``ConfigError`` line naming ``key`` and the valid names, unless ``value`` is one."""
    if value not in choices:
        raise unknown_choice(key, value, choices)


POSITIVE_INT = Rule(int, 1)
POSITIVE = Rule(float, 0, low_open=True)
PROBABILITY = Rule(float, 0, 1, high_open=True)
WEIGHT = Rule(float, 0)
