"""``${run_id:}``: a short random suffix that makes every run directory unique.

Why: the default run directory was ``<log_dir>/<job>/<time to the second>``, so two runs started in the same
second (a sweep script, two terminals) shared one directory: one ``results.json`` overwrote the other, and two
trainings wrote into one ``last.ckpt`` and ``export/`` while the saved config named only the second. Six hex
digits (16.7M values) beside the time keep directories sortable by time and apart. Cached, so every place
that resolves ``hydra.run.dir`` in one process sees the same suffix.
"""

from __future__ import annotations

import secrets

from omegaconf import OmegaConf

RESOLVER = "run_id"


def register_run_id() -> None:
    """Make ``${run_id:}`` resolvable (idempotent); entry points call it before Hydra composes."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, lambda: secrets.token_hex(3), use_cache=True)
