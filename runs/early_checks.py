"""Config errors that need no torch, raised before ``train.py`` / ``evaluate.py`` import it.

Why: importing torch, Lightning and transformers takes 8-13 s on a laptop CPU, and a typo in a number
(``model.lr=abc``) or a cached-loss size that cannot divide the batch was reported only after it. These
checks read the composed config alone (omegaconf, no torch), so the entry points run them first and the
heavy imports follow only for a config that can run. ``train()`` / ``evaluate()`` run them again, so the
Python API (which skips the entry points) refuses the same configs.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.runs.config_checks import EVALUATE_RULES, TRAIN_RULES, check_mini_batch_size, check_numbers
from sts_lightning.runs.seed_table import check_seeds


def precheck_train(cfg: DictConfig) -> None:
    """Numbers in range; ``model.mini_batch_size`` divides the per-device batch where the device count is a number;
    a ``seeds`` list that can run."""
    if cfg.get("seeds") is not None:
        check_seeds(cfg)
    if cfg.get("pipeline"):
        return  # each stage is its own train() call, checked there
    check_numbers(cfg, TRAIN_RULES)
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
