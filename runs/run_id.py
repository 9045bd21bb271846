"""``${run_id:}``: six random hex digits beside the time (cached per process), so two runs started in one second get
two directories. ``${rank_zero_only:x}`` / ``${rank_suffix:}``: ranks launched by torchrun or srun share one run
directory, where only rank 0 writes ``.hydra/`` and every other rank logs to a file of its own.
"""

from __future__ import annotations

import os
import secrets

from omegaconf import OmegaConf

RESOLVER = "run_id"


def register_run_id() -> None:
    """Make ``${run_id:}`` resolvable (idempotent); entry points call it before Hydra composes."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, lambda: secrets.token_hex(3), use_cache=True)
    if not OmegaConf.has_resolver("rank_zero_only"):
        OmegaConf.register_new_resolver("rank_zero_only", lambda value: None if launched_rank() else value)
        OmegaConf.register_new_resolver("rank_suffix", lambda: f".{launched_rank()}" if launched_rank() else "")


def launched_rank() -> str:
    """``""`` on global rank 0 (or alone), else a label of its rank, from the launcher's variables."""
    for key in ("RANK", "SLURM_PROCID"):
        value = os.environ.get(key, "")
        if value.isdigit():
            return f"rank{value}" if int(value) else ""
    node, local = os.environ.get("NODE_RANK", "0"), os.environ.get("LOCAL_RANK", "0")
    return f"node{node}.local{local}" if (node, local) != ("0", "0") else ""
