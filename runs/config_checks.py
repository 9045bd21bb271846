"""Every number a run reads from its config, checked before anything heavy loads.

Why: ``encoder.batch_size=0`` or ``model.lr=abc`` used to pass composition and fail minutes later, after the
model and data had loaded, with a traceback from deep inside torch; ``trainer.max_steps=0`` exported the
untouched base model with exit 0. One table of keys and ranges, one line naming the key and what is allowed.
Keys absent from a config (another model's options) are skipped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

from omegaconf import DictConfig, OmegaConf

from sts_lightning.embeddings.errors import ConfigError


class Rule(NamedTuple):
    kind: type              # int or float
    low: float              # smallest allowed value (inclusive unless low_open)
    high: float = math.inf  # largest allowed value (inclusive unless high_open)
    low_open: bool = False
    high_open: bool = False
    nullable: bool = False  # None allowed (e.g. max_length: the model's own)
    also: tuple = ()        # extra allowed values outside the range (e.g. -1 = unlimited)

    def describe(self) -> str:
        what = "an integer" if self.kind is int else "a number"
        lo = f"> {self.low:g}" if self.low_open else f">= {self.low:g}"
        hi = "" if math.isinf(self.high) else (f" and < {self.high:g}" if self.high_open else f" and <= {self.high:g}")
        extra = "".join(f" or {v}" for v in self.also) + (" or null" if self.nullable else "")
        return f"{what} {lo}{hi}{extra}"


_ABSENT = object()
POSITIVE_INT = Rule(int, 1)
COUNT = Rule(int, 0)

TRAIN_RULES: dict[str, Rule] = {
    "seed": Rule(int, 0),
    "data.batch_size": POSITIVE_INT,
    "data.num_workers": COUNT,
    "data.max_sentences": Rule(int, 1, nullable=True),
    "model.lr": Rule(float, 0, low_open=True),
    "model.weight_decay": Rule(float, 0),
    "model.warmup_ratio": Rule(float, 0, 1, high_open=True),
    "model.max_length": Rule(int, 1, nullable=True),
    "model.eval_batch_size": POSITIVE_INT,
    "model.scale": Rule(float, 0, low_open=True),  # cosine x scale (mnrl, in-batch CT, cosent / angle)
    "model.mini_batch_size": Rule(int, 1, nullable=True),
    "trainer.max_steps": Rule(int, 1, also=(-1,)),
    "trainer.max_epochs": Rule(int, 1, nullable=True, also=(-1,)),
    "trainer.num_nodes": POSITIVE_INT,
    "trainer.accumulate_grad_batches": POSITIVE_INT,
    "trainer.gradient_clip_val": Rule(float, 0, nullable=True),
    "callbacks.sts_evaluation.batch_size": POSITIVE_INT,
}
EVALUATE_RULES: dict[str, Rule] = {
    "seed": Rule(int, 0),
    "threads": Rule(int, 1, nullable=True),
    "encoder.batch_size": POSITIVE_INT,
    "encoder.max_length": Rule(int, 1, nullable=True),
}


def check_numbers(cfg: DictConfig | Mapping, rules: Mapping[str, Rule]) -> None:
    """Raise ``ConfigError`` for the first configured value outside its rule (see the module docstring)."""
    cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(dict(cfg))
    for key, rule in rules.items():
        value = OmegaConf.select(cfg, key, default=_ABSENT)  # resolved: an interpolated number is checked too
        if value is _ABSENT or (value is None and rule.nullable) or value in rule.also:
            continue
        number = _as_number(value, rule.kind)
        ok = number is not None and (number > rule.low if rule.low_open else number >= rule.low) and \
            (number < rule.high if rule.high_open else number <= rule.high)
        if not ok:
            raise ConfigError(f"{key}={value!r} is not allowed: it must be {rule.describe()}")


def _as_number(value: object, kind: type) -> float | None:
    if isinstance(value, bool):
        return None
    if kind is int:
        return float(value) if isinstance(value, int) else None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):  # YAML reads 1e-4 as a string; float() accepts it, "abc" stays refused
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def check_mini_batch_size(cfg: DictConfig, world_size: int) -> None:
    """``model.mini_batch_size`` (a cached in-batch loss) must divide the per-device batch.

    Why: every forward pass of the cached loss then holds the same number of sentences, so its memory is
    what the mini-batch was sized for. ``world_size``: devices x nodes (``data.batch_size`` is global).
    """
    size = OmegaConf.select(cfg, "model.mini_batch_size", default=None)
    batch = OmegaConf.select(cfg, "data.batch_size", default=None)
    if size is None or not isinstance(batch, int) or world_size < 1 or batch % world_size:
        return  # no cache, or the batch check of the data module speaks first
    per_device = batch // world_size
    if per_device % size:
        raise ConfigError(f"model.mini_batch_size={size} must divide the per-device batch {per_device} "
                          f"(data.batch_size={batch} over {world_size} device(s))")
