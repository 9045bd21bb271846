"""One training in its own process that can die like ``kill -9`` at an injected fault (for test_fault_injection).

Why a process: a real kill runs no ``finally`` and no ``atexit``, so what it leaves on disk (a half-written
checkpoint or export, temporary copies) is only seen when the process really ends with ``os._exit``.

Usage: ``python -m tests.runs.fault_driver '<json>'`` with ``out``, ``model_dir``, ``data_dir``,
``overrides`` and ``fault``:

- ``null``: no fault;
- ``"step:K"``: die at the start of optimizer step K (its ``last.ckpt`` for step K-1 is written);
- ``"checkpoint:N"``: die half-way through writing the N-th checkpoint file;
- ``"export"``: die while the export is written (weights in place, its manifest half-written).
- ``"rank:R:step:K"``: in a DDP run, only global rank ``R`` dies, by a real ``SIGKILL`` (as the OOM killer does),
  at the start of optimizer step ``K`` (``"rank:R:step:K:SIGSTOP"``: it hangs there instead); every rank writes
  ``<out>/rank<r>.pid`` and ``<out>/rank<r>.exit`` (its exit code, unless it was killed), the faulty one
  ``<out>/fault_at`` (its wall clock), so a test can time the survivors.

The final metrics go to ``<out>/driver_metrics.json``.

``python -m tests.runs.fault_driver --script train.py <overrides...>`` runs an entry script as a user does
(Hydra, ``run_or_exit``, its exit code and stderr), after installing the faults the environment asks for:
``FAULT_ENOSPC="<match>:<skip>:<nbytes>"`` fills the disk (``tests.disk_quota``), and ``FAULT_RENAMES=<file>``
appends ``{"target", "sha256"}`` for every file renamed into place, so a test knows the checksum of the last
whole copy of a file that a full disk then failed to replace; ``FAULT_PAUSE`` holds the run inside a phase until a
signal arrives (``tests/runs/phase_pause.py``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import runpy
import signal
import sys
import time
from pathlib import Path

from lightning.pytorch import Callback

KILLED = 137  # what a shell reports for kill -9


class ExitAt(Callback):
    """Die (no cleanup at all) at the start of optimizer step ``step``."""

    def __init__(self, step: int):
        self.step = int(step)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.step:
            os._exit(KILLED)


class KillRankAt(Callback):
    """``kill -9`` (or another signal: ``SIGSTOP`` hangs it) of one rank of a DDP run at the start of optimizer step
    ``step``; the others go on. Records every rank's pid, the fault's wall-clock time and each rank's exit code."""

    exit_file: Path | None = None  # <out>/rank<r>.exit: this process's exit code, written by __main__ below

    def __init__(self, rank: int, step: int, out: str, signame: str = "SIGKILL"):
        self.rank, self.step, self.out, self.signum = int(rank), int(step), Path(out), signal.Signals[signame]

    def setup(self, trainer, pl_module, stage):
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / f"rank{trainer.global_rank}.pid").write_text(str(os.getpid()))
        KillRankAt.exit_file = self.out / f"rank{trainer.global_rank}.exit"

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_rank == self.rank and trainer.global_step == self.step:
            (self.out / "fault_at").write_text(repr(time.time()))
            os.kill(os.getpid(), self.signum)


def die_during_checkpoint_write(n: int) -> None:
    """The ``n``-th ``torch.save`` writes half its bytes, then the process dies."""
    import torch

    real, calls = torch.save, [0]

    def save(obj, f, *args, **kwargs):
        calls[0] += 1
        if calls[0] < n:
            return real(obj, f, *args, **kwargs)
        buffer = io.BytesIO()
        real(obj, buffer, *args, **kwargs)
        data = buffer.getvalue()
        f.write(data[: len(data) // 2])
        f.flush()
        os._exit(KILLED)

    torch.save = save


def die_during_export() -> None:
    """The export's manifest (written last, inside its temporary directory) is half-written, then death."""
    import sts_lightning.embeddings.io.export_manifest as manifest

    def write_manifest(folder):
        (Path(folder) / manifest.MANIFEST_FILE).write_text('{"format": "sts-lightning-exp')
        os._exit(KILLED)

    manifest.write_manifest = write_manifest


def record_renames(log_file: Path) -> None:
    """Append each file's SHA-256 to ``log_file`` as ``os.replace`` puts it into place (directories: skipped)."""
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        real(src, dst, *args, **kwargs)
        if os.path.isfile(dst):
            entry = {"target": os.path.abspath(dst), "sha256": hashlib.sha256(Path(dst).read_bytes()).hexdigest()}
            with open(log_file, "a") as fh:
                fh.write(json.dumps(entry) + "\n")

    os.replace = replace


def run_script(script: str, args: list[str]) -> None:
    """``python <script> <args>`` in this process, with the environment's faults installed."""
    from tests.disk_quota import install_from_env
    from tests.runs import phase_pause

    if os.environ.get("FAULT_RENAMES"):
        record_renames(Path(os.environ["FAULT_RENAMES"]))
    install_from_env()
    phase_pause.install_from_env()
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")


def main(spec: dict) -> None:
    from sts_lightning.embeddings.io.atomic import atomic_write
    from sts_lightning.runs.train_run import train
    from tests.helpers import compose_train_config

    overrides = list(spec["overrides"])
    fault = spec.get("fault") or ""
    if fault.startswith("step:"):
        overrides += ["+callbacks.kill._target_=tests.runs.fault_driver.ExitAt", f"+callbacks.kill.step={fault[5:]}"]
    elif fault.startswith("rank:"):
        _, rank, _, step, *signame = fault.split(":")
        overrides += ["+callbacks.kill._target_=tests.runs.fault_driver.KillRankAt", f"+callbacks.kill.rank={rank}",
                      f"+callbacks.kill.step={step}", f"+callbacks.kill.out={spec['out']}",
                      f"+callbacks.kill.signame={(signame or ['SIGKILL'])[0]}"]
    elif fault.startswith("checkpoint:"):
        die_during_checkpoint_write(int(fault[11:]))
    elif fault == "export":
        die_during_export()
    elif fault:
        raise ValueError(f"unknown fault {fault!r}")
    out = Path(spec["out"])
    metrics = train(compose_train_config(out, Path(spec["model_dir"]), Path(spec["data_dir"]), overrides))
    # every rank of a DDP run gets here: each renames a whole copy into place (two plain writes interleaved)
    atomic_write(out / "driver_metrics.json", json.dumps(metrics, sort_keys=True).encode())


if __name__ == "__main__":
    if sys.argv[1] == "--script":
        run_script(sys.argv[2], sys.argv[3:])
    else:
        from sts_lightning.embeddings.errors import run_or_exit

        # Hydra instantiated the callback from this module, not from __main__
        from tests.runs import fault_driver

        try:
            run_or_exit(main, json.loads(sys.argv[1]))  # as train.py: our errors end in one line and their exit code
        except SystemExit as stop:
            if fault_driver.KillRankAt.exit_file is not None:
                fault_driver.KillRankAt.exit_file.write_text(str(stop.code))
            raise
