"""``sts-train`` / ``python -m sts_lightning.train`` / the checkout's ``train.py``: train a method.

A thin Hydra wrapper around :func:`runs.launch.launch`, in the package so that the console script, ``python -m`` and
the checkout's script are one module reading the package's configs (a wheel has no checkout).
"""

from __future__ import annotations

import sys
import types

import hydra
from omegaconf import DictConfig

import sts_lightning
from sts_lightning.embeddings.errors import run_or_exit
from sts_lightning.embeddings.io.package_files import CONFIG_DIR
from sts_lightning.embeddings.stop_request import exit_at_once_if_preempted
from sts_lightning.runs.config_checks import check_config
from sts_lightning.runs.constructor_defaults import register as register_constructor_defaults
from sts_lightning.runs.help_text import register_resolver
from sts_lightning.runs.overrides import exit_on_bad_overrides
from sts_lightning.runs.run_id import register_run_id

register_constructor_defaults()  # constructor/<Class>: the defaults the configs depart from
register_run_id()  # ${run_id:} in configs/hydra/default.yaml: one directory per run
register_resolver()  # `--help` fills configs/hydra/help/train.yaml from the code and configs


def run(cfg: DictConfig) -> dict[str, float]:
    """The job in its run directory (``sl.train`` runs this too): the final metrics; ``ConfigError`` for bad input."""
    check_config(cfg)  # config errors in one line before torch loads
    from sts_lightning.runs.launch import launch  # deferred: --help must not load torch (layering)

    return launch(cfg)


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="train")
def main(cfg: DictConfig) -> None:
    run_or_exit(run, cfg)  # a bad input: one line, exit 2 (embeddings/errors.py)


def cli() -> None:
    """The command: overrides checked, then Hydra; a preempted run (exit 75) ends at once."""
    exit_on_bad_overrides("train")  # a mistyped group, key or +key: one line before Hydra (runs/overrides.py)
    try:
        main()
    except SystemExit as stop:  # a preempted run (75) ends now, not after the interpreter's teardown (seconds)
        exit_at_once_if_preempted(stop)
        raise


class _CallableModule(types.ModuleType):
    """``sl.train(...)`` calls the Python API even once importing this module made it the package's ``train``."""

    def __call__(self, *args, **kwargs):
        return sts_lightning.__getattr__("train")(*args, **kwargs)  # the package's lazy API (not this module)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    cli()
