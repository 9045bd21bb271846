"""``train.py`` on the tiny fixtures as a process of its own, one rank or two (test_stopping, test_preemption).

Why one place: both modules compare resumed runs with the same uninterrupted 8-step run, which
``tests/runs/conftest.py`` makes once a session; their commands must then be the same, word for word.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT
from tests.runs.run_equality import EIGHT_STEPS

TRAIN_PY = [sys.executable, "train.py"]
FAULT_DRIVER = [sys.executable, "-m", "tests.runs.fault_driver", "--script", "train.py"]  # FAULT_* from the env
TINY = ["model.max_length=32", "model.eval_batch_size=8", "data.sources=[snli:dev,sick:trial]", "data.batch_size=4",
        "trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false",
        "callbacks.sts_evaluation.batch_size=8"]
DDP = ["trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp"]
DIST_ENV = ("MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "RANK", "GROUP_RANK")


def command(out: Path, model_dir: Path, data_dir: Path, extra: list[str], script: list[str] = TRAIN_PY) -> list[str]:
    """The 8-step run (``EIGHT_STEPS``) of ``script`` on the tiny model and data, in ``out``."""
    return [*script, f"paths.data_dir={data_dir}", f"model.model_name_or_path={model_dir}", *TINY, *EIGHT_STEPS,
            f"hydra.run.dir={out}", *extra]


def env(**extra: str) -> dict[str, str]:
    """This process's environment without a rank or port of its own, plus ``extra``."""
    base = {k: v for k, v in os.environ.items() if k not in DIST_ENV}
    base.update(PYTHONPATH=str(ROOT), WANDB_MODE="disabled", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1",
                **extra)
    return base


def start(cmd: list[str], log: Path, environment: dict[str, str]) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as fh:  # a file, not a pipe: a full pipe would stall the run
        return subprocess.Popen(cmd, cwd=ROOT, env=environment, stdout=fh, stderr=subprocess.STDOUT)


def ranks(out: Path, model_dir: Path, data_dir: Path, extra: list[str], logs: Path, script: list[str] = TRAIN_PY,
          **extra_env: str) -> list[subprocess.Popen]:
    """Both ranks of a 2-rank gloo run as the caller's own children, with the environment Lightning's launcher (or
    torchrun) gives each rank, so that each rank's exit code is seen."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    common = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "WORLD_SIZE": "2", "NODE_RANK": "0", **extra_env}
    rank1 = ["hydra.output_subdir=null", "hydra.job.name=train_ddp_process_1"]  # as Lightning's launcher does
    return [start(command(out, model_dir, data_dir, [*DDP, *extra, *(rank1 if r else [])], script),
                  logs / f"rank{r}.log", env(**common, LOCAL_RANK=str(r))) for r in (0, 1)]


def tails(logs: list[Path]) -> str:
    return "\n".join(f"--- {log}\n{log.read_text()[-3000:]}" for log in logs)
