"""The Python training API: ``sl.train("simcse", ["trainer.max_steps=100"])`` is ``sts-train model=simcse ...``.

Hydra's own run, not a composed config handed to ``train(cfg)``, so the run is the command's (composition, run
directory, checks, job), inside ``kept_process_state`` so a notebook can train twice; errors raise, not exit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra import version
from hydra.core.config_search_path import ConfigSearchPath, SearchPathQuery
from omegaconf import DictConfig

from sts_lightning.embeddings.errors import ConfigError, user_errors
from sts_lightning.embeddings.io.package_files import CONFIG_DIR
from sts_lightning.process_state import kept_process_state
from sts_lightning.runs.compat import config_search_path, main_hydra
from sts_lightning.runs.overrides import check_command_line
from sts_lightning.train import run as job  # the command's own job (importing it registers ${run_id:} & co.)

SUMMARY_FILE = "sts_before_after.md"  # runs/run_summary.py: the STS table before / after training


@dataclass(frozen=True)
class Run:
    """A finished training run: its directory, final metrics (the seeds' means) and composed job config."""

    dir: Path
    metrics: dict[str, float]
    config: DictConfig = field(repr=False)

    @property
    def export(self) -> Path | None:
        """The exported model directory (``sl.load(run.export)``), or ``None`` for ``export=false``."""
        path = self.dir / "export"
        return path if path.is_dir() else None

    @property
    def table(self) -> str:
        """The STS table before / after training (markdown), as the command printed it; ``""`` if none."""
        path = self.dir / SUMMARY_FILE
        return path.read_text() if path.is_file() else ""

    def load(self, **options: Any):
        """The export as a ``SentenceModel``, scored as its ``LOADING.md`` says (``sl.load(run.export)``)."""
        from sts_lightning.api import load  # deferred: the API loads torch and the encoders

        if self.export is None:
            raise ConfigError(f"{self.dir} has no export (trained with export=false)")
        return load(self.export, **options)


def command_line(model: str | None, overrides: Sequence[str], experiment: str | None) -> list[str]:
    if isinstance(overrides, str):
        overrides = [overrides]
    args = [f"model={model}"] if model else []
    args += [f"experiment={experiment}"] if experiment else []
    return args + [str(o) for o in overrides]


def search_path(config_dirs: Sequence[Path]) -> ConfigSearchPath:
    """The package's configs, then the user's folders where ``--config-dir`` puts one (before the schema entry)."""
    path = config_search_path(str(CONFIG_DIR))
    for folder in config_dirs:
        path.prepend(provider="command-line", path=f"file://{folder}", anchor=SearchPathQuery(provider="schema"))
    return path


@user_errors
def train(model: str | None = None, overrides: Sequence[str] = (), *, experiment: str | None = None,
          config_dir: str | Path | Sequence[str | Path] | None = None) -> Run:
    """Train as ``sts-train`` would with the same arguments (``train("simcse", ["trainer.max_steps=100"])``,
    ``train("my_model", config_dir="conf")`` for ``conf/model/my_model.yaml``); returns the :class:`Run`."""
    given = [config_dir] if isinstance(config_dir, str | Path) else list(config_dir or [])
    dirs = [Path(d).expanduser().resolve() for d in given]
    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:
        raise ConfigError(f"config_dir {missing[0]} is not a directory")
    args = command_line(model, overrides, experiment)
    listed = [f"hydra.searchpath=[{','.join(f'file://{d}' for d in dirs)}]"] if dirs else []
    check_command_line("train", [*args, *listed])  # a mistyped group, key or +key: ConfigError, the command's line
    metrics: dict[str, float] = {}

    def task(cfg: DictConfig) -> None:
        metrics.update(job(cfg) or {})

    with kept_process_state():  # as @hydra.main: version base, the app (Hydra.create_main_hydra2), its run
        version.setbase("1.3")
        hydra = main_hydra("train", search_path(dirs))
        done = hydra.run(config_name="train", task_function=task, overrides=args)
    return Run(Path(done.hydra_cfg.hydra.runtime.output_dir), metrics, done.cfg)
