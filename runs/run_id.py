"""``${run_id:}``: a short random suffix that makes every run directory unique.

Why: the default run directory was ``<log_dir>/<job>/<time to the second>``, so two runs started in the same
second (a sweep script, two terminals) shared one directory: one ``results.json`` overwrote the other, and two
trainings wrote into one ``last.ckpt`` and ``export/`` while the saved config named only the second. Six hex
digits (16.7M values) beside the time keep directories sortable by time and apart. Cached, so every place
that resolves ``hydra.run.dir`` in one process sees the same suffix.

Also ``${rank_zero_only:x}`` and ``${rank_suffix:}`` (configs/hydra/default.yaml): processes started by torchrun or
srun on several nodes each run Hydra as if alone, and all of them share one ``hydra.run.dir`` (given on the command
line, the only way their directories agree). Only the process of global rank 0 writes ``.hydra/`` there, and each
other rank logs to a file of its own (``train.rank1.log``) instead of appending to rank 0's ``train.log``; Lightning's
own launcher does the same for the ranks it starts (``hydra.output_subdir=null``, a job name of their own).
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
    """``""`` in the process of global rank 0 (or one started alone), else a label of this process's rank.

    Read from what the launcher set before Python started (Hydra composes before torch.distributed exists):
    torchrun ``RANK``, SLURM ``SLURM_PROCID``, Lightning's own launcher ``NODE_RANK`` / ``LOCAL_RANK``.
    """
    for key in ("RANK", "SLURM_PROCID"):
        value = os.environ.get(key, "")
        if value.isdigit():
            return f"rank{value}" if int(value) else ""
    node, local = os.environ.get("NODE_RANK", "0"), os.environ.get("LOCAL_RANK", "0")
    return f"node{node}.local{local}" if (node, local) != ("0", "0") else ""
