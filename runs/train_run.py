"""``train(cfg)``: build data, model, callbacks, loggers and trainer from the config, fit, export.

Every piece is ``hydra.utils.instantiate``d from its config group, so a new method needs only its config file.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from lightning.pytorch import LightningDataModule, seed_everything
from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.utilities.model_helpers import is_overridden
from omegaconf import DictConfig, open_dict
from omegaconf.errors import MissingMandatoryValue
from torch.utils.data import DataLoader

from sts_lightning.callbacks.progress_log import run_begins
from sts_lightning.callbacks.step_budget import StepBudget
from sts_lightning.embeddings.console import configure_console, interactive
from sts_lightning.embeddings.errors import ConfigError, DataError, DivergedError, first_line
from sts_lightning.embeddings.io.atomic import sweep_orphans
from sts_lightning.embeddings.io.checkpoint_file import load_checkpoint
from sts_lightning.embeddings.isolated_rng import rng_isolated
from sts_lightning.embeddings.scoring.protocols import Exportable
from sts_lightning.embeddings.stop_request import StopRequested, listening
from sts_lightning.runs.bounded_ddp import group_in_use, release_group_at_exit, stop_on_lost_rank
from sts_lightning.runs.checkpoint_io import AtomicCheckpointIO
from sts_lightning.runs.config_checks import (
    check_config,
    check_mini_batch_size,
    check_packaged_installs,
    world_size,
)
from sts_lightning.runs.first_step import announce_first_step
from sts_lightning.runs.hub_push import check_hub_push, push_from_config
from sts_lightning.runs.run_summary import run_summary
from sts_lightning.runs.stopping import describe_stop, export_on_rank_zero, preemption_signals
from sts_lightning.runs.trainer_setup import requested_devices, resolve_trainer
from sts_lightning.runs.training_facts import training_facts
from sts_lightning.runs.wandb_export import finished_at_end, log_config, log_final
from sts_lightning.sts.leaks import warn_leaks

log = logging.getLogger(__name__)


def _build(node: DictConfig, **kwargs):
    """``instantiate`` that unwraps our own ``ConfigError`` / ``DataError``, so the command prints them as one line."""
    try:
        return instantiate(node, **kwargs)
    except InstantiationException as err:
        if isinstance(err.__cause__, (ConfigError, DataError, MissingMandatoryValue)):
            raise err.__cause__ from None
        if isinstance(err.__cause__, TypeError) and "unexpected keyword argument" in str(err.__cause__):
            # a +key the source reading of runs/overrides.py could not refuse (a target it cannot follow): one line
            raise ConfigError(f"{node._get_full_key(None) or 'config'}: {first_line(err.__cause__)}") from None
        raise


def _instantiate_all(group: DictConfig | None) -> list:
    """Every ``_target_`` entry of a mapping group (callbacks, logger); ``null`` entries are switched off."""
    if not group:
        return []
    return [_build(node) for node in group.values() if node is not None and "_target_" in node]


def ensure_val_loop(datamodule) -> None:
    """A one-item validation loader for a datamodule without one: the STS callback scores in
    ``on_validation_epoch_end``, a loop Lightning runs only for a datamodule with ``val_dataloader``."""
    if is_overridden("val_dataloader", datamodule, parent=LightningDataModule):
        return
    # Own generator: an iterator of a generator-less DataLoader draws its base seed from the global RNG,
    # which would shift the dropout masks of a resumed run against an uninterrupted one.
    datamodule.val_dataloader = lambda: DataLoader([0], batch_size=1, generator=torch.Generator())


def isolate_preparation(datamodule) -> None:
    """``prepare_data`` / ``setup`` leave the random streams alone: a cold and a warm cache must train alike."""
    for hook in ("prepare_data", "setup"):
        setattr(datamodule, hook, rng_isolated(getattr(datamodule, hook)))


def resolve_ckpt_path(ckpt_path: str | None, output_dir: Path) -> str | None:
    """``"last"`` -> ``<output_dir>/checkpoints/last.ckpt`` when present, else a fresh start (Lightning's ``"last"``
    looks only where the current ModelCheckpoint writes); paths must exist."""
    if ckpt_path in (None, ""):
        return None
    if str(ckpt_path) == "last":
        last = output_dir / "checkpoints" / "last.ckpt"
        if last.is_file():
            log.info("resuming from %s", last)
            load_checkpoint(last)
            return str(last)
        # A run directory without checkpoints/ is almost always a new one: hydra.run.dir was not given.
        new = "" if last.parent.is_dir() else (" (a new run directory: to continue an earlier run, give its "
                                               "directory with hydra.run.dir=<run dir>)")
        log.warning("ckpt_path=last: no checkpoint at %s%s", last, new)
        log.warning("ckpt_path=last: starting fresh from step 0")
        return None
    path = Path(str(ckpt_path)).expanduser()
    if not path.is_file():
        raise ConfigError(f"ckpt_path {str(path)!r} is not a file (use null, 'last', or a .ckpt path)")
    load_checkpoint(path)  # weights only, one line naming the file if it is unsafe or damaged
    return str(path)


def check_not_diverged(model, metrics: dict) -> None:
    """``DivergedError`` when the weights or final STS scores are not finite (the last update can blow them up)."""
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        if tensor.is_floating_point() and not torch.isfinite(tensor.detach()).all():
            raise DivergedError(f"training diverged: {name} holds non-finite values after the last step; "
                                "nothing exported. Lower the learning rate or enable gradient clipping.")
    bad = sorted(k for k, v in metrics.items() if k.startswith("val/") and k.endswith("_spearman")
                 and not math.isfinite(float(v)))
    if bad:
        raise DivergedError(f"training diverged: the final STS scores are not finite ({', '.join(bad)}): the "
                            "model's similarities overflow; nothing exported. Lower the learning rate or enable "
                            "gradient clipping.")


def refuse_foreign_run(output_dir: Path, ckpt_path: str | None) -> None:
    """Refuse a fresh run in a directory that holds a run's checkpoints: it would write over them."""
    folder = output_dir / "checkpoints"
    found = sorted(p.name for p in folder.glob("*.ckpt")) if folder.is_dir() else []
    if found and ckpt_path is None:
        raise ConfigError(f"{output_dir} already holds a run ({', '.join(found[:3])} in checkpoints/): resume it "
                          "with ckpt_path=last, or start this run in another hydra.run.dir")


def _summary(trainer, output_dir: Path, elapsed_s: float, exported: bool) -> str:
    """The run summary: the best checkpoint (not last.ckpt's), the export, and which budget stopped the run."""
    best = next((c for c in trainer.checkpoint_callbacks if c.monitor), None)
    score = getattr(best, "best_model_score", None)
    return run_summary(output_dir, elapsed_s, best_checkpoint=getattr(best, "best_model_path", None) or None,
                       best_score=float(score) if score is not None else None,
                       monitor=getattr(best, "monitor", None), exported=exported,
                       stopped=next((c.summary for c in trainer.callbacks if isinstance(c, StepBudget)), None))


def train(cfg: DictConfig) -> dict[str, float]:
    """Fit the configured model into ``cfg.output_dir``; returns the final ``trainer.callback_metrics`` as floats."""
    group_in_use()
    run_begins()  # "step 1 starts ... after launch" counts from here for a later seed / stage of this process
    with listening(preemption_signals(cfg)):
        try:
            metrics = _train(cfg)
            release_group_at_exit()  # multi-rank: the group is destroyed before Python's teardown (runs/bounded_ddp.py)
            return metrics
        except StopRequested as stop:  # a stop outside the fit (model build, export): its one line here
            describe_stop(stop, Path(cfg.output_dir), cfg.get("ckpt_path"))
            raise


def _train(cfg: DictConfig) -> dict[str, float]:
    if cfg.get("pipeline"):
        raise ConfigError("a config with a `pipeline` block runs its stages through runs.launch.launch "
                          "(python train.py experiment=<pipeline>), not train()")
    started = time.monotonic()
    configure_console()
    check_config(cfg)  # one line for a config mistake, before anything loads (already done by train.py: not again)
    check_hub_push(cfg)  # push_to_hub: repo id, offline, token, hub reachable: one line before anything loads
    resolve_trainer(cfg.trainer)  # devices / precision checked before anything heavy loads
    if world_size(cfg) is None:  # "auto" / "0,1": counted by torch, so not checked before it loaded
        gpus = torch.cuda.device_count() if cfg.trainer.accelerator == "gpu" else 1
        check_mini_batch_size(cfg, requested_devices(cfg.trainer.devices, gpus) * int(cfg.trainer.get("num_nodes", 1)))
    if not interactive():  # a bar redrawn with \r is unreadable in a file: LogProgress prints lines instead
        with open_dict(cfg.trainer):
            cfg.trainer.enable_progress_bar = False
    eval_tasks = (cfg.get("callbacks") or {}).get("sts_evaluation", {}) or {}
    warn_leaks(cfg.data, list(eval_tasks.get("tasks") or []))
    seed_everything(int(cfg.seed), workers=True)
    output_dir = Path(cfg.output_dir)
    ckpt_path = resolve_ckpt_path(cfg.get("ckpt_path"), output_dir)  # checked before anything heavy loads
    refuse_foreign_run(output_dir, ckpt_path)
    for folder in (output_dir, output_dir / "checkpoints"):  # half-written export / checkpoint of a killed attempt
        sweep_orphans(folder)
    datamodule = _build(cfg.data)
    ensure_val_loop(datamodule)
    isolate_preparation(datamodule)
    check_packaged_installs(cfg)  # every missing packaged weight in one line, before the first model loads
    # plain lists / dicts (not ListConfig): hyper-parameters go into checkpoints, which load weights-only
    model = _build(cfg.model, _convert_="all")
    if cfg.get("export") and not isinstance(model, Exportable):
        raise ConfigError(f"{type(model).__name__} has no export(path) (embeddings.scoring.protocols.Exportable): "
                          "set export=false")
    loggers = _instantiate_all(cfg.get("logger"))
    with finished_at_end(loggers):  # else wandb tears the open run down at exit, with a traceback in its log
        # configs/callbacks/default.yaml lists every always-on callback; a learning-rate monitor fails without a logger.
        callbacks = [c for c in _instantiate_all(cfg.get("callbacks")) if loggers or not isinstance(c, LearningRateMonitor)]
        plugins = {} if cfg.trainer.get("plugins") else {"plugins": [AtomicCheckpointIO()]}
        trainer = _build(cfg.trainer, callbacks=callbacks, logger=loggers or False, **plugins)
        log_config(loggers, cfg)
        announce_first_step(datamodule, trainer, cfg.model.get("model_name_or_path"), resuming=ckpt_path is not None)
        # weights_only=True: a checkpoint never runs code on load, even with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 set
        with stop_on_lost_rank(trainer, output_dir):  # a rank that dies or hangs: one line, exit 69
            trainer.fit(model, datamodule=datamodule, ckpt_path=ckpt_path,
                        weights_only=True)
            check_not_diverged(model, trainer.callback_metrics)  # before anything is exported
            if cfg.get("export"):  # on rank 0; the model card (README.md) gets what only this run knows
                export_on_rank_zero(trainer, lambda: model.export(output_dir / "export", training_facts(
                    cfg, trainer, datamodule, output_dir, time.monotonic() - started, ckpt_path is not None)))
        if trainer.is_global_zero:  # W&B: the STS table and the export as a model artifact
            log_final(trainer, output_dir / "export" if cfg.get("export") else None)
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
        if trainer.is_global_zero:
            log.info("%s", _summary(trainer, output_dir, time.monotonic() - started, bool(cfg.get("export"))))
        if trainer.is_global_zero:  # last: a dropped upload leaves the export and summary above, and its retry command
            push_from_config(cfg, output_dir / "export")
        return metrics
