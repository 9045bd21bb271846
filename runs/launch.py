"""``launch(cfg)``: what ``python train.py`` runs -- one training run, or a pipeline of them.

Why a module of its own: a pipeline runs ordinary training runs (``runs.pipeline_run`` calls
``runs.train_run.train``), so the choice between the two belongs above both, not inside ``train`` (which made
``train_run`` and ``pipeline_run`` import each other).
"""

from __future__ import annotations

from omegaconf import DictConfig

from sts_lightning.runs.pipeline_run import run_pipeline
from sts_lightning.runs.train_run import train


def launch(cfg: DictConfig) -> dict[str, float]:
    """Run the stages of a config with a ``pipeline`` block, else train once; returns the final metrics."""
    return run_pipeline(cfg) if cfg.get("pipeline") else train(cfg)
