"""W&B reporting of a training run beyond Lightning's metrics: the resolved config, the STS table, the export.

Why here and not in a callback: the export directory is written by ``train()`` after ``trainer.fit``
returns, so only ``train()`` knows when it is complete. Lightning leaves the W&B run open after fit,
so logging to it then is still part of the same run.

Works with no network: with ``logger=wandb_offline`` (``WANDB_MODE=offline``) the table goes to the
run's ``files/media``, the artifact's manifest into the run's ``.wandb`` log and its files, under their
own names, to ``<W&B run dir>/artifacts/staging/model-<run id>/`` (hard links: ``runs.wandb_staging``),
inside ``<output_dir>/wandb/offline-run-*``; ``wandb sync <W&B run dir>`` uploads all three later.
wandb's own default stages them in ``~/.local/share/wandb``, so a run directory copied elsewhere for
``wandb sync`` lost its model. ``finish`` closes the run when ``train()`` ends.

Also registers the resolvers ``configs/logger/wandb.yaml`` uses for the run's group and tags
(``runs.run_labels``): ``train()`` imports this module before it builds the loggers.
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
    """The W&B loggers that have a live run: a disabled run (``WANDB_MODE=disabled``) gets nothing.

    Why the check: staging links or copies every export file into the run directory even when the run
    then ignores it; where links cannot be made, that is hundreds of MB for nothing.
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


@contextmanager
def staging_inside(run) -> Iterator[Path]:
    """Stage artifact files in the W&B run's own directory (``run.sync_dir``) instead of ``$WANDB_DATA_DIR``.

    Why: wandb copies every added file to ``<WANDB_DATA_DIR>/artifacts/staging`` (``~/.local/share/wandb``
    by default; read when a file is added and when the artifact is logged) and an offline run's
    manifest points there, so the directory ``wandb sync`` takes was incomplete. Pointing the variable
    at the run for just this call keeps it in the run without touching the user's other W&B runs.
    Yields the staging directory.
    """
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
    """Log the final STS table and the export directory (a ``model`` artifact) to every W&B run.

    Called on rank 0 after the export is written. The artifact's files are linked into the W&B run's
    directory under their own names (``runs.wandb_staging.snapshot``), a snapshot that a later run
    writing the same ``export/`` cannot change before ``wandb sync``. The artifact is named ``model-<run id>`` (Lightning's
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
    """Finish the W&B run of every W&B logger that started one; ``exit_code`` 1 marks it failed.

    Why: Lightning leaves the run open after fit, and a run still open when the interpreter exits is torn
    down by wandb's atexit hook with the connection to wandb-core already closed: the run's message loop
    is abandoned and ``logs/debug.log`` ends in a ``HandleAbandonedError`` traceback, with no exit record
    in the run's ``.wandb`` file. Finishing here, after the export is logged, closes the run properly.
    Only loggers whose run exists (Lightning's ``_experiment``; None on ranks > 0 and before the first
    use) are finished: asking for ``logger.experiment`` would start a run just to end it.
    """
    for logger in loggers:
        run = started_experiment(logger) if isinstance(logger, WandbLogger) else None
        if run is not None and callable(getattr(run, "finish", None)):
            run.finish(exit_code=exit_code)


@contextmanager
def finished_at_end(loggers: list) -> Iterator[None]:
    """Finish the W&B runs when the block ends: exit code 0 when it returns, 1 when it raises."""
    try:
        yield
    except BaseException:
        finish(loggers, exit_code=1)
        raise
    finish(loggers)
