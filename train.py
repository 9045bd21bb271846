"""Train a method: ``python train.py model=sbert_nli data=nli trainer=gpu``.

Thin Hydra wrapper around :func:`runs.launch.launch` (one run, or a pipeline of runs); see ``configs/train.yaml``.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from sts_lightning.embeddings.errors import run_or_exit
from sts_lightning.embeddings.stop_request import exit_at_once_if_preempted
from sts_lightning.runs.early_checks import precheck_train
from sts_lightning.runs.help_text import register_resolver
from sts_lightning.runs.overrides import exit_on_bad_overrides
from sts_lightning.runs.run_id import register_run_id

register_run_id()  # ${run_id:} in configs/hydra/default.yaml: one directory per run
register_resolver()  # `--help` fills configs/hydra/help/train.yaml from the code and configs


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> None:
    run_or_exit(precheck_train, cfg)  # config errors in one line before torch loads (runs/early_checks.py)
    from sts_lightning.runs.launch import (
        launch,  # deferred: `--help` must not load torch (see tests/layering.py)
    )

    run_or_exit(launch, cfg)


if __name__ == "__main__":
    exit_on_bad_overrides("train")  # a mistyped group, key or +key: one line before Hydra (runs/overrides.py)
    try:
        main()
    except SystemExit as stop:  # a preempted run (75) ends now, not after the interpreter's teardown (seconds)
        exit_at_once_if_preempted(stop)
        raise
