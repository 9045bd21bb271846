"""The private names of Lightning and Hydra that the top layer imports, in one place (those reached through an
object are in ``embeddings/compat.py``). Lightning is imported by the function that needs it, so the command
line's checks load neither it nor torch; tests/runs/test_compat.py fails by name when a version lacks one.
"""

from __future__ import annotations

import functools

from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path, get_args_parser
from hydra.core.singleton import Singleton

hydra_args_parser = get_args_parser  # Hydra's own command-line parser: the flags @hydra.main reads
config_search_path = create_config_search_path  # (folder): the search path @hydra.main builds for it
main_hydra = Hydra.create_main_hydra2  # (task_name, config_search_path): the app @hydra.main creates; .run a job


def hydra_singletons() -> dict:
    """Hydra's live singleton table (class -> instance), to set a caller's aside."""
    return Singleton._instances


def lightning_is_interactive() -> bool:
    """Lightning's own test for a notebook / REPL (``_IS_INTERACTIVE``), where its ``auto`` picks ``ddp_notebook``."""
    from lightning.fabric.utilities.imports import _IS_INTERACTIVE

    return bool(_IS_INTERACTIVE)


class KeepsCSVFile:
    """Before Lightning's CSV ``ExperimentWriter``: ``_check_log_dir_exists`` (deletes ``metrics.csv``) does nothing."""

    def _check_log_dir_exists(self) -> None:
        pass

    @property
    def fs(self):
        return self._fs


def csv_experiment(logger, writer: type):
    """``CSVLogger.experiment`` with our ``writer``, made once (its private ``_experiment`` and ``_fs``)."""
    if logger._experiment is None:
        logger._fs.makedirs(logger.root_dir, exist_ok=True)
        logger._experiment = writer(log_dir=logger.log_dir)
    return logger._experiment


class WatchesChildRanks:
    """Before Lightning's ``DDPStrategy``: its subprocess launcher calls ``self.watch_children(procs)`` instead of
    starting Lightning's observer, which SIGKILLs every rank once one child has exited non-zero."""

    def _configure_launcher(self) -> None:
        super()._configure_launcher()
        plain, watched = _launchers()
        if type(self._launcher) is plain:
            self._launcher = watched(self.cluster_environment, self.num_processes, self.num_nodes)
            self._launcher.watch = self.watch_children


def child_processes(strategy) -> list:
    """The child ranks rank 0 started (the subprocess launcher's ``procs``); empty for every other launcher."""
    return list(getattr(getattr(strategy, "launcher", None), "procs", None) or [])


@functools.cache
def _launchers() -> tuple[type, type]:
    """Lightning's ``_SubprocessScriptLauncher`` and the same with our watcher (its ``launch``, observer swapped)."""
    from lightning.fabric.utilities.distributed import _set_num_threads_if_needed
    from lightning.pytorch.strategies.launchers.subprocess_script import _SubprocessScriptLauncher

    class Watched(_SubprocessScriptLauncher):
        watch = None

        def launch(self, function, *args, trainer=None, **kwargs):
            self.cluster_environment.validate_settings(num_devices=self.num_processes, num_nodes=self.num_nodes)
            if not self.cluster_environment.creates_processes_externally:
                self._call_children_scripts()
                self.watch(self.procs)
            _set_num_threads_if_needed(num_processes=self.num_processes)
            return function(*args, **kwargs)

    return _SubprocessScriptLauncher, Watched
