"""``runs/compat.py``: each private name of Lightning and Hydra we import is still there, with the shape we use.

A failing test names the private part an upgrade removed; pyproject.toml bounds the versions these passed with.
"""

from __future__ import annotations

import inspect
import subprocess
import sys

from sts_lightning.runs import compat
from tests.paths import ROOT


def test_hydra_still_has__internal_utils_get_args_parser():
    args, _ = compat.hydra_args_parser().parse_known_args(["--config-dir", "/x", "a=1"])
    assert args.config_dir == "/x" and args.overrides == ["a=1"] and hasattr(args, "shell_completion")


def test_hydra_still_has__internal_create_config_search_path_and_hydra_create_main_hydra2():
    from hydra._internal.hydra import Hydra

    path = compat.config_search_path("/some/configs")
    assert any(e.path == "/some/configs" for e in path.get_path()) and callable(path.prepend)
    assert {"task_name", "config_search_path"} <= set(inspect.signature(Hydra.create_main_hydra2).parameters)
    assert callable(Hydra.run)


def test_hydra_singleton_still_has__instances():
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.singleton import Singleton

    HydraConfig.instance()
    table = compat.hydra_singletons()
    assert table is Singleton._instances and isinstance(table.get(HydraConfig), HydraConfig)


def test_lightning_still_has__is_interactive():
    assert compat.lightning_is_interactive() is False


def test_lightning_still_has__subprocess_script_launcher_with_the_parts_we_use():
    from lightning.pytorch.strategies import DDPStrategy

    plain, watched = compat._launchers()
    assert issubclass(watched, plain)
    assert {"cluster_environment", "num_processes", "num_nodes"} <= set(inspect.signature(plain).parameters)
    assert callable(plain._call_children_scripts) and callable(DDPStrategy._configure_launcher)
    # the launch we replace: children started, then Lightning's observer; ours swaps only the observer
    assert "_launch_process_observer(self.procs)" in inspect.getsource(plain.launch)
    from lightning.fabric.plugins.environments import LightningEnvironment

    strategy = type("S", (compat.WatchesChildRanks, DDPStrategy), {"watch_children": lambda self, procs: None})(
        cluster_environment=LightningEnvironment())
    strategy._configure_launcher()
    assert type(strategy.launcher) is watched and compat.child_processes(strategy) == []


def test_importing_it_loads_neither_lightning_nor_torch():
    code = "import sys; import sts_lightning.runs.compat; print(sorted({'lightning', 'torch'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_lightning_csv_writer_still_has__check_log_dir_exists_and__fs_and_the_logger__experiment(tmp_path):
    from lightning.pytorch.loggers import CSVLogger
    from lightning.pytorch.loggers.csv_logs import ExperimentWriter

    assert callable(ExperimentWriter._check_log_dir_exists)
    (tmp_path / "metrics.csv").write_text("step\n0\n")

    class Kept(compat.KeepsCSVFile, ExperimentWriter):
        pass

    assert Kept(str(tmp_path)).fs.isfile(str(tmp_path / "metrics.csv"))  # not deleted
    logger = CSVLogger(str(tmp_path / "logs"))
    assert logger._experiment is None and compat.csv_experiment(logger, Kept) is compat.csv_experiment(logger, Kept)
