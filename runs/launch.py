"""``launch(cfg)``: what ``python train.py`` runs -- one training run, a pipeline of them, or one per seed; above
both ``train_run`` and ``pipeline_run`` (a pipeline runs ordinary training runs), so neither imports the other.
"""

from __future__ import annotations

from omegaconf import DictConfig

from sts_lightning.runs.pipeline_run import run_pipeline
from sts_lightning.runs.seed_runs import run_seeds
from sts_lightning.runs.train_run import train


def launch(cfg: DictConfig) -> dict[str, float]:
    if cfg.get("seeds") is not None:
        return run_seeds(cfg)  # refuses seeds together with a pipeline
    return run_pipeline(cfg) if cfg.get("pipeline") else train(cfg)
