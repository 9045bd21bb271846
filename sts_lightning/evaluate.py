"""``sts-evaluate`` / ``python -m sts_lightning.evaluate`` / the checkout's ``evaluate.py``: score STS tasks.

A thin Hydra wrapper around :func:`runs.evaluate_run.evaluate`, in the package as ``sts_lightning.train`` is.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from sts_lightning.embeddings.errors import run_or_exit
from sts_lightning.embeddings.io.package_files import CONFIG_DIR
from sts_lightning.runs.config_checks import check_config
from sts_lightning.runs.constructor_defaults import register as register_constructor_defaults
from sts_lightning.runs.help_text import register_resolver
from sts_lightning.runs.overrides import exit_on_bad_overrides
from sts_lightning.runs.run_id import register_run_id

register_constructor_defaults()  # constructor/<Class>: the defaults the configs depart from
register_run_id()  # ${run_id:} in configs/hydra/default.yaml: one directory per run
register_resolver()  # `--help` fills configs/hydra/help/evaluate.yaml from the code and configs


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="evaluate")
def main(cfg: DictConfig) -> None:
    run_or_exit(check_config, cfg)  # config errors in one line before torch loads
    from sts_lightning.runs.evaluate_run import evaluate  # deferred: --help must not load torch (layering)

    run_or_exit(evaluate, cfg)


def cli() -> None:
    exit_on_bad_overrides("evaluate")  # a mistyped group, key or +key: one line before Hydra (runs/overrides.py)
    main()


if __name__ == "__main__":
    cli()
