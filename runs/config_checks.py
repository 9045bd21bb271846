"""Every number a run reads from its config, checked before anything heavy loads.

Why: ``encoder.batch_size=0`` or ``model.lr=abc`` used to pass composition and fail minutes later, after the
model and data had loaded, with a traceback from deep inside torch; ``trainer.max_steps=0`` exported the
untouched base model with exit 0. One table of keys and ranges, one line naming the key and what is allowed.
Keys absent from a config (another model's options) are skipped. The ``model.*`` rules are the constructors' own
(``lightning_modules.arg_rules.MODEL_RULES``), so ``XModule(lr=0)`` in Python and ``model.lr=0`` here give one error.
"""

from __future__ import annotations

from collections.abc import Mapping

from omegaconf import DictConfig, OmegaConf

from sts_lightning.datamodules.mixture_rules import check_mixture
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.lightning_modules.arg_rules import (
    MODEL_CHOICES,
    MODEL_RULES,
    POSITIVE_INT,
    Rule,
    check_choice,
    check_value,
)
from sts_lightning.sts.tasks import expand_groups

_ABSENT = object()
COUNT = Rule(int, 0)

TRAIN_RULES: dict[str, Rule] = {
    "seed": Rule(int, 0),
    "data.batch_size": POSITIVE_INT,
    "data.num_workers": COUNT,
    "data.max_sentences": Rule(int, 1, nullable=True),
    **{f"model.{name}": rule for name, rule in MODEL_RULES.items()},  # the constructors' own table
    "trainer.max_steps": Rule(int, 1, also=(-1,)),
    "trainer.max_epochs": Rule(int, 1, nullable=True, also=(-1,)),
    "trainer.num_nodes": POSITIVE_INT,
    "trainer.accumulate_grad_batches": POSITIVE_INT,
    "trainer.gradient_clip_val": Rule(float, 0, nullable=True),
    "callbacks.sts_evaluation.batch_size": Rule(int, 1, nullable=True),
    "callbacks.sts_evaluation.max_tokens": Rule(int, 1, nullable=True),
}
EVALUATE_RULES: dict[str, Rule] = {
    "seed": Rule(int, 0),
    "threads": Rule(int, 1, nullable=True),
    "encoder.batch_size": Rule(int, 1, nullable=True),  # null: batches by encoder.max_tokens
    "encoder.max_tokens": Rule(int, 1, nullable=True),
    "encoder.max_length": Rule(int, 1, nullable=True),
    "bootstrap.samples": COUNT,
    "bootstrap.seed": COUNT,
}


def check_numbers(cfg: DictConfig | Mapping, rules: Mapping[str, Rule]) -> None:
    """Raise ``ConfigError`` for the first configured value outside its rule (see the module docstring)."""
    cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(dict(cfg))
    for key, rule in rules.items():
        value = OmegaConf.select(cfg, key, default=_ABSENT)  # resolved: an interpolated number is checked too
        if value is not _ABSENT:
            check_value(key, value, rule)


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


def check_model_options(cfg: DictConfig) -> None:
    """Named options (``MODEL_CHOICES``) are known names and ``model.teacher_weights`` (RankCSE) holds one weight
    per ``data.teachers`` entry, before any teacher or model loads."""
    for name, choices in MODEL_CHOICES.items():
        value = OmegaConf.select(cfg, f"model.{name}", default=_ABSENT)
        if value is not _ABSENT:
            check_choice(f"model.{name}", value, choices)
    weights = OmegaConf.select(cfg, "model.teacher_weights", default=None)
    teachers = OmegaConf.select(cfg, "data.teachers", default=None)
    if weights is None or not OmegaConf.is_list(weights) or not OmegaConf.is_list(teachers):
        return  # unset (equal weights), or a bad value the number rules name
    if len(weights) != len(teachers):
        raise ConfigError(f"model.teacher_weights has {len(weights)} weight(s) for {len(teachers)} teacher(s) "
                          f"(data.teachers): give one weight per teacher, or model.teacher_weights=null (equal)")


def check_data_mixture(cfg: DictConfig) -> None:
    """``data.mixture`` / ``data.mixture_weights`` / ``data.no_duplicates`` (``datamodules.mixture_rules``, the
    DataModules' own check), for a data group that has them, before torch or any data loads."""
    data = cfg.get("data") or {}
    if not any(key in data for key in ("mixture", "mixture_weights", "no_duplicates")):
        return
    sources = data.get("sources") or []
    weights = data.get("mixture_weights")
    check_mixture([sources] if isinstance(sources, str) else list(sources), data.get("mixture"),
                  list(weights) if OmegaConf.is_list(weights) else weights, data.get("no_duplicates", False))


def check_monitored_task(cfg: DictConfig) -> None:
    """The best checkpoint's metric (``callbacks.model_checkpoint.monitor``) is one the STS evaluation logs.

    Why: ``callbacks.sts_evaluation.tasks=[sts16]`` without ``stsb-dev`` trained to its first validation, then died in
    Lightning's ModelCheckpoint with a 60-line traceback (``could not find the monitored key``): found when a test
    cut a default run down to one small task (issue 48). The line names the keys that will exist.
    """
    callbacks = cfg.get("callbacks") or {}
    checkpoint, evaluation = callbacks.get("model_checkpoint"), callbacks.get("sts_evaluation")
    monitor = checkpoint.get("monitor") if checkpoint is not None else None
    if not isinstance(monitor, str) or not monitor.startswith("val/") or not monitor.endswith("_spearman") \
            or evaluation is None or evaluation.get("tasks") is None:
        return
    tasks = [evaluation.tasks] if isinstance(evaluation.tasks, str) else [str(t) for t in evaluation.tasks]
    if any("${" in t for t in tasks):
        return
    tasks = expand_groups(tasks)
    logged = [f"val/{t}_spearman" for t in tasks] + ["val/sts_avg_spearman"]
    if monitor in logged:
        return
    raise ConfigError(f"callbacks.model_checkpoint.monitor={monitor} is not evaluated: "
                      f"callbacks.sts_evaluation.tasks={tasks} logs {', '.join(logged)}; "
                      f"set callbacks.model_checkpoint.monitor={logged[0]} (or val/sts_avg_spearman)")
