"""W&B reporting of a training run beyond Lightning's metrics: the resolved config, the STS table, the export.

Why here and not in a callback: the export directory is written by ``train()`` after ``trainer.fit``
returns, so only ``train()`` knows when it is complete. Lightning leaves the W&B run open after fit,
so logging to it then is still part of the same run.

Works with no network: with ``logger=wandb_offline`` (``WANDB_MODE=offline``) the table goes to the
run's ``files/media`` and the artifact's manifest into the run's ``.wandb`` log, its files are copied
to ``$WANDB_DATA_DIR/artifacts/staging``; ``wandb sync <run dir>`` uploads both later.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

from lightning.pytorch.loggers import WandbLogger
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

TABLE_KEY = "val/sts_final"
TABLE_COLUMNS = ["task", "spearman", "pearson"]


def _wandb_loggers(loggers: Iterable) -> list[WandbLogger]:
    """The W&B loggers that have a live run: a disabled run (``WANDB_MODE=disabled``) gets nothing.

    Why the check: ``wandb.Artifact.add_dir`` copies every file to the staging area even when the run
    then ignores it, which for a real model is hundreds of MB for nothing.
    """
    return [lg for lg in loggers if isinstance(lg, WandbLogger) and not getattr(lg.experiment, "disabled", False)]


def log_config(loggers: Iterable, cfg: DictConfig) -> None:
    """Send the whole resolved Hydra config to every W&B run.

    Why: Lightning logs only the model's (and datamodule's) ``save_hyperparameters``; the data sources,
    trainer, callbacks and seed that make a run reproducible live in the Hydra config alone. Resolved,
    so interpolations (paths, output dir) show their actual values. Rank 0 only (``log_hyperparams``).
    """
    for logger in loggers:
        if isinstance(logger, WandbLogger):
            logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))


def _finite_or_none(value: float) -> float | None:
    """NaN (e.g. a constant-similarity STS task) is not valid JSON for the artifact metadata."""
    return value if math.isfinite(value) else None


def sts_rows(metrics: Mapping[str, float]) -> list[list]:
    """``[task, spearman, pearson]`` for every task with both ``val/<task>_spearman`` and ``val/<task>_pearson``.

    Aggregates without a Pearson value (``val/sts_avg_spearman``) are left out: they are not a task.
    """
    rows = []
    for key in sorted(metrics):
        if key.startswith("val/") and key.endswith("_spearman"):
            task = key[len("val/"):-len("_spearman")]
            pearson = metrics.get(f"val/{task}_pearson")
            if pearson is not None:
                rows.append([task, _finite_or_none(metrics[key]), _finite_or_none(pearson)])
    return rows


def log_final(trainer, export_dir: Path | None) -> None:
    """Log the final STS table and the export directory (a ``model`` artifact) to every W&B run.

    Called on rank 0 after the export is written. The artifact is named ``model-<run id>`` (Lightning's
    own ``log_model`` convention), so a resumed run adds a version to the same artifact; its metadata
    are the final metrics, which makes exports comparable in the W&B artifact browser.

    Args:
        trainer: the fitted Trainer; its ``loggers`` and ``callback_metrics`` are read.
        export_dir: the export directory, or None when ``export=false`` (then only the table is logged).
    """
    loggers = _wandb_loggers(trainer.loggers)
    if not loggers:
        return
    import wandb

    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    rows = sts_rows(metrics)
    for logger in loggers:
        if rows:
            logger.log_table(key=TABLE_KEY, columns=TABLE_COLUMNS, data=rows, step=trainer.global_step)
        if export_dir is not None and Path(export_dir).is_dir():
            run = logger.experiment
            artifact = wandb.Artifact(name=f"model-{run.id}", type="model",
                                      metadata={k: _finite_or_none(v) for k, v in metrics.items()})
            artifact.add_dir(str(export_dir))
            run.log_artifact(artifact)
            log.info("logged %s as W&B artifact %s", export_dir, artifact.name)
