"""The stop path's step boundary: every rank stops after the same optimizer step, ``last.ckpt``, exit 75.

Lightning's handlers exit 0 with no checkpoint (docs/reliability.md), so ours record the signal and the ranks agree
on it (an all-reduce MAX) at each optimizer-step boundary; a stop raised between steps by ``check_stop`` arrives in
:meth:`Preemption.on_exception`.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import lightning as L
import torch
import torch.distributed as dist
from lightning.fabric.plugins.environments import SLURMEnvironment

from sts_lightning.callbacks.last_checkpoint import LastCheckpoint
from sts_lightning.embeddings import compat, stop_request
from sts_lightning.embeddings.errors import ConfigError, Preempted
from sts_lightning.embeddings.stop_request import StopRequested

log = logging.getLogger(__name__)
UNCATCHABLE = {signal.SIGKILL, signal.SIGSTOP}
DEFAULT_SIGNALS = ("SIGTERM", "SIGUSR1")  # configs/callbacks/default.yaml's too


def parse_signals(names: Sequence[str | int]) -> list[signal.Signals]:
    """``["SIGTERM", "USR1", 10]`` -> signals; ConfigError for an unknown or uncatchable one."""
    parsed = []
    for name in names:
        text = str(name).strip().upper()
        try:
            sig = signal.Signals(int(text)) if text.isdigit() else signal.Signals[text if text.startswith("SIG")
                                                                                  else f"SIG{text}"]
        except (KeyError, ValueError):
            raise ConfigError(f"callbacks.preemption.signals: unknown signal {name!r} (e.g. SIGTERM, SIGUSR1)") from None
        if sig in UNCATCHABLE:
            raise ConfigError(f"callbacks.preemption.signals: {sig.name} cannot be caught; use SIGTERM or SIGUSR1")
        parsed.append(sig)
    return parsed


def slurm_job_id(env: dict[str, str]) -> str | None:
    """The id ``scontrol requeue`` takes: ``<array job>_<task>`` for an array task, else ``SLURM_JOB_ID``."""
    job = f"{env['SLURM_ARRAY_JOB_ID']}_{env.get('SLURM_ARRAY_TASK_ID', '')}" if env.get("SLURM_ARRAY_JOB_ID") \
        else env.get("SLURM_JOB_ID")
    return job if job and re.fullmatch(r"[0-9]+(_[0-9]+)?", job) else None


def requeue_slurm_job(env: dict[str, str] | None = None) -> bool:
    """``scontrol requeue <job>`` (as Lightning's SLURM handler does); True when it succeeded. Logs either way."""
    job = slurm_job_id(dict(os.environ) if env is None else env)
    if job is None:
        log.warning("preemption: no SLURM job id in the environment: not requeued")
        return False
    try:
        done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        log.warning("preemption: scontrol requeue %s failed (%s): resubmit the job by hand", job, err)
        return False
    if done.returncode != 0:
        log.warning("preemption: scontrol requeue %s exited %d: %s", job, done.returncode, done.stderr.strip())
        return False
    log.info("preemption: SLURM job %s requeued", job)
    return True


def agreement(trainer: L.Trainer) -> Callable[[int], int] | None:
    """For ``stop_request.stretch``: the signal any rank received (a collective), or ``None`` on one process."""
    if not (dist.is_available() and dist.is_initialized() and trainer.world_size > 1):
        return None
    device = trainer.strategy.root_device

    def agree(local: int) -> int:
        flag = torch.tensor([local], dtype=torch.int64, device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item())

    return agree


def resume_line(run_dir: Path, checkpoint: str | None, started_from: str | None) -> str:
    """How to continue: ``hydra.run.dir=<run> ckpt_path=last``, or only ``hydra.run.dir`` for a run started from
    another checkpoint than last.ckpt and stopped before saving one."""
    if checkpoint is None and started_from and str(started_from) != "last" and Path(started_from).name != "last.ckpt":
        return f"start it again with the same command plus hydra.run.dir={run_dir} (exit code 75)"
    return f"continue with the same command plus hydra.run.dir={run_dir} ckpt_path=last (exit code 75)"


def _rank(trainer) -> str:
    return f"rank {trainer.global_rank}: " if trainer.world_size > 1 else ""


def mark_mid_evaluation(checkpoint: dict) -> None:
    """Mark the validation running as ``checkpoint`` was written unfinished, so a resume runs it again, not skips it."""
    loops = checkpoint.get("loops", {}).get("fit_loop", {})
    progress = loops.get("epoch_loop.val_loop.batch_progress")
    if not progress or progress["total"]["started"] < 1:
        return
    total = progress["total"]
    total["ready"] = total["started"]
    total["processed"] = total["completed"] = total["started"] - 1
    progress["current"] = {"ready": 1, "started": 1, "processed": 0, "completed": 0}
    progress["is_last_batch"] = False


class Preemption(L.Callback):
    """Stop every rank at the optimizer-step boundary after one of ``signals`` reached any rank; ``last.ckpt``; 75.
    ``every_n_steps``: how often the ranks agree (an all-reduce; on GPUs it waits for the step); ``slurm_requeue``:
    requeue the job when it stopped on ``SLURMEnvironment``'s ``requeue_signal``."""

    def __init__(self, signals: Sequence[str | int] = DEFAULT_SIGNALS, every_n_steps: int = 1,
                 slurm_requeue: bool = True):
        self.signals = parse_signals(signals)
        if int(every_n_steps) < 1:
            raise ConfigError(f"callbacks.preemption.every_n_steps must be >= 1, got {every_n_steps}")
        self.every_n_steps = int(every_n_steps)
        self.slurm_requeue = bool(slurm_requeue)
        self._previous: dict[signal.Signals, object] = {}
        self._checked_step: int | None = None
        self._first_step: int | None = None  # global_step before this process's first training batch
        self._mid_evaluation = False  # set while the stop's last.ckpt is written from inside a validation
        self._stopping = False

    @property
    def received(self) -> int:
        """The first signal this process received (0: none)."""
        return stop_request.received()

    @received.setter
    def received(self, signum: int) -> None:
        stop_request.clear()
        if signum:
            stop_request.request(signum)

    def _install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            log.warning("preemption: not on the main thread, signal handlers not installed")
            return
        for sig, previous in stop_request.install(self.signals).items():
            self._previous.setdefault(sig, previous)

    def _restore(self) -> None:
        stop_request.restore(self._previous)
        self._previous = {}

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        self._stopping, self._first_step = False, None
        self._install()  # train() listens from its start already (caches built before this hook); a bare fit too
        compat.after_lightning_signal_handlers(trainer, self._install)  # its teardown puts ours back, ours the rest

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._restore()

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        if isinstance(exception, StopRequested) and not self._stopping:
            self._stopping = True
            self._stop_between_steps(trainer, exception)
        if not self._stopping:  # our own stop keeps the flag-only handler: a second SIGTERM must not cut the exit
            self._restore()

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        if self._mid_evaluation:
            mark_mid_evaluation(checkpoint)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._checked_step = trainer.global_step

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        if self._first_step is None:
            self._first_step = trainer.global_step

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        step = trainer.global_step
        if step == self._checked_step or step % self.every_n_steps:  # mid gradient accumulation, or not yet
            return
        self._checked_step = step
        agree = agreement(trainer)  # the signal any rank received (0: none), the same on every rank
        signum = self.received if agree is None else agree(self.received)
        if signum:
            self._stop(trainer, signum)

    def _save(self, trainer: L.Trainer, signum: int) -> str | None:
        """``last.ckpt`` at this step on every rank (the save is collective); rank 0 then requeues under SLURM."""
        if trainer.is_global_zero:
            compat.quiet_lightning_observer()
        savers = [c for c in trainer.checkpoint_callbacks if isinstance(c, LastCheckpoint)]
        save = savers[0].save_now if savers else lambda trainer, **_: None
        path = save(trainer, again=True) if self._mid_evaluation else save(trainer)
        environment = compat.cluster_environment(trainer)
        if (trainer.is_global_zero and self.slurm_requeue and isinstance(environment, SLURMEnvironment)
                and environment.auto_requeue and signum == environment.requeue_signal):
            requeue_slurm_job()
        return path

    def _stop(self, trainer: L.Trainer, signum: int) -> None:
        name, step, rank = signal.Signals(signum).name, trainer.global_step, _rank(trainer)
        origin = "this rank" if self.received else "another rank"
        log.warning("preemption: %s received (on %s): stopping after optimizer step %d", name, origin, step)
        self._stopping = True
        path = self._save(trainer, signum)
        if path is None:
            raise Preempted(f"{rank}{name} at step {step}: no checkpoint written (no last_checkpoint callback, or "
                            "a run that writes none)")
        raise Preempted(f"{rank}{name}: stopped after optimizer step {step}, {path} written; "
                        f"{resume_line(Path(path).parent.parent, path, None)}")

    def _stop_between_steps(self, trainer: L.Trainer, stop: StopRequested) -> None:
        """A stop raised by a loop's ``check_stop`` (an evaluation, a cache build): save what this process added."""
        step = trainer.global_step
        stepped = self._first_step is not None and step > self._first_step
        what = f"{_rank(trainer)}{stop.message}"
        log.warning("preemption: %s: stopping (optimizer step %d)", what, step)
        path = None
        if stepped:
            self._mid_evaluation = bool(trainer.validating and not trainer.sanity_checking)
            try:
                path = self._save(trainer, stop.signum)
            finally:
                self._mid_evaluation = False
        run_dir = Path(trainer.default_root_dir)
        started = getattr(trainer, "ckpt_path", None)
        if path is not None:
            again = " (its validation runs again)" if trainer.validating else ""
            stop.describe(f"{what}: stopped after optimizer step {step}, {path} written{again}; "
                          f"{resume_line(run_dir, path, started)}")
        elif step > 0:
            stop.describe(f"{what}: stopped at optimizer step {step}, nothing new to save since {started}; "
                          f"{resume_line(run_dir, started, started)}")
        else:
            stop.describe(f"{what}: stopped before the first optimizer step, nothing to save; "
                          f"{resume_line(run_dir, None, started)}")
