"""W&B reporting beyond Lightning's metrics: the resolved config, the final STS table, the export as an artifact.

Offline runs keep everything, the artifact's files included, inside the run directory for a later ``wandb sync``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from lightning.pytorch.loggers import WandbLogger
from omegaconf import DictConfig, OmegaConf

from sts_lightning.embeddings.compat import started_experiment
from sts_lightning.runs.run_labels import run_group, run_tags
from sts_lightning.runs.wandb_staging import snapshot

log = logging.getLogger(__name__)

TABLE_KEY = "val/sts_final"
TABLE_COLUMNS = ["task", "spearman", "pearson"]


def _experiment() -> str | None:
    """``experiment=<name>`` of the running Hydra job; None outside one (a config composed in a test)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    return HydraConfig.get().runtime.choices.get("experiment")


# ${sts.wandb_group:${model}} / ${sts.wandb_tags:${model}} in configs/logger/wandb.yaml.
OmegaConf.register_new_resolver("sts.wandb_group", lambda model: run_group(model, _experiment()), replace=True)
OmegaConf.register_new_resolver("sts.wandb_tags", run_tags, replace=True)


def _wandb_loggers(loggers: Iterable) -> list[WandbLogger]:
    """The W&B loggers with a live run (``WANDB_MODE=disabled``: none, so no export is staged for nothing)."""
    return [lg for lg in loggers if isinstance(lg, WandbLogger) and not getattr(lg.experiment, "disabled", False)]


def log_config(loggers: Iterable, cfg: DictConfig) -> None:
    """Send the whole resolved Hydra config to every W&B run (Lightning logs only ``save_hyperparameters``)."""
    for logger in loggers:
        if isinstance(logger, WandbLogger):
            logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))


def _finite_or_none(value: float) -> float | None:
    """NaN (e.g. a constant-similarity STS task) is not valid JSON for the artifact metadata."""
    return value if math.isfinite(value) else None


def sts_rows(metrics: Mapping[str, float]) -> list[list]:
    """``[task, spearman, pearson]`` for every task with both ``val/<task>_spearman`` and ``val/<task>_pearson``."""
    rows = []
    for key in sorted(metrics):
        if key.startswith("val/") and key.endswith("_spearman"):
            task = key[len("val/"):-len("_spearman")]
            pearson = metrics.get(f"val/{task}_pearson")
            if pearson is not None:
                rows.append([task, _finite_or_none(metrics[key]), _finite_or_none(pearson)])
    return rows


@contextmanager
def staging_inside(run) -> Iterator[Path]:
    """``$WANDB_DATA_DIR`` in the run's own directory for the block, so ``wandb sync`` has the artifact's files."""
    previous = os.environ.get("WANDB_DATA_DIR")
    os.environ["WANDB_DATA_DIR"] = str(Path(run.sync_dir).resolve())
    try:
        yield Path(os.environ["WANDB_DATA_DIR"]) / "artifacts" / "staging"
    finally:
        if previous is None:
            os.environ.pop("WANDB_DATA_DIR", None)
        else:
            os.environ["WANDB_DATA_DIR"] = previous


def log_final(trainer, export_dir: Path | None) -> None:
    """Log the final STS table and the export (artifact ``model-<run id>``, ``None``: none) to every W&B run; rank 0."""
    loggers = _wandb_loggers(trainer.loggers)
    if not loggers:
        return
    import wandb

    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    rows = sts_rows(metrics)
    for logger in loggers:
        run = logger.experiment
        with staging_inside(run) as staging:  # a logged Table is an artifact too: its JSON is staged as well
            if rows:
                logger.log_table(key=TABLE_KEY, columns=TABLE_COLUMNS, data=rows, step=trainer.global_step)
            if export_dir is not None and Path(export_dir).is_dir():
                artifact = wandb.Artifact(name=f"model-{run.id}", type="model",
                                          metadata={k: _finite_or_none(v) for k, v in metrics.items()})
                staged = snapshot(Path(export_dir), staging / artifact.name)
                for name, path in staged:
                    artifact.add_file(str(path), name=name, policy="immutable")
                run.log_artifact(artifact)
                log.info("logged %s as W&B artifact %s (files staged in %s)", export_dir, artifact.name,
                         staged[0][1].parent if staged else staging)


def finish(loggers: Iterable, exit_code: int = 0) -> None:
    """Finish every started W&B run (``exit_code`` 1: failed): wandb's teardown of an open run records no exit."""
    for logger in loggers:
        run = started_experiment(logger) if isinstance(logger, WandbLogger) else None
        if run is not None and callable(getattr(run, "finish", None)):
            run.finish(exit_code=exit_code)


@contextmanager
def finished_at_end(loggers: list) -> Iterator[None]:
    try:
        yield
    except BaseException:
        finish(loggers, exit_code=1)
        raise
    finish(loggers)
