"""Preemption: on SIGTERM / SIGUSR1 every rank stops at the next optimizer-step boundary, ``last.ckpt`` is
written at that step and every rank exits with ``EXIT_PREEMPTED`` (75); ``ckpt_path=last`` continues bit for bit.

Why our own handler instead of Lightning 2.6's (``trainer/connectors/signal_connector.py``, the loops'
``received_sigterm`` checks): measured, a SIGTERM made ``train.py`` exit 0 with no checkpoint. Lightning raises
``SIGTERMException``, a ``SystemExit`` without a code (so 0: a scheduler records a finished job), and writes nothing
unless an ``OnExceptionCheckpoint`` is added. Its cross-rank agreement is a *broadcast from rank 0* at each step, so
a signal that reaches only another rank (a single killed pod, ``kill`` of one process) stops that rank alone at its
next step end while rank 0 waits in its next collective for ever; and its handler itself runs ``dist.broadcast``
inside the signal handler on the one signalled rank, a collective out of step with the others. Its SLURM requeue
handler (SIGUSR1) saves an ``hpc_ckpt_*.ckpt`` from inside the handler too: mid-step, with a barrier in it.

Here the handler only records the signal; at each optimizer-step boundary (``on_train_batch_end`` after a step,
where the step-triggered ``last.ckpt`` is written: the same state a resume continues exactly) the ranks agree with
an all-reduce (MAX) of that 0 / signal flag, so a signal that reached any one rank stops all of them at the same
step; every rank then takes part in the ``LastCheckpoint`` save (rank 0 writes it atomically through
``AtomicCheckpointIO``) and raises ``Preempted`` (exit 75, see ``embeddings/errors.py`` for the choice).

Lightning's handlers for these signals are replaced for the fit: Lightning installs its own after the ``setup``
hooks, so ours are installed again right after it does (the trainer's signal connector is wrapped) and there is no
window where its in-handler broadcast could run. SLURM: Lightning's ``SLURMEnvironment`` plugin still detects the
cluster (ranks, addresses, nodes) and holds its ``auto_requeue`` / ``requeue_signal`` settings; when the run stops
on that requeue signal with ``auto_requeue`` on, rank 0 requeues the job (``scontrol requeue``) *after* the
checkpoint is written (``slurm_requeue=false`` leaves that to the sbatch script). Data loader workers forked after
``setup`` inherit the handler, so a signal sent to the whole process group does not kill them mid-epoch.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

import lightning as L
import torch
import torch.distributed as dist
from lightning.fabric.plugins.environments import SLURMEnvironment

from sts_lightning.callbacks.last_checkpoint import LastCheckpoint
from sts_lightning.embeddings.errors import ConfigError, Preempted

log = logging.getLogger(__name__)
UNCATCHABLE = {signal.SIGKILL, signal.SIGSTOP}


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


def quiet_launcher_observer() -> None:
    """Stop the watcher thread of Lightning's own launcher (rank 0 of ``python train.py trainer.devices=N``).

    Why: that thread polls the child ranks every 5 s and SIGKILLs every process, rank 0 included, as soon as one
    child has exited non-zero -- which every rank does here, with 75, a moment apart: rank 0 would then end 137
    at random. Called by rank 0 once all ranks have agreed to stop, when nothing is left for it to guard.
    """
    for thread in threading.enumerate():
        if thread.name == "child-process-observer" and hasattr(thread, "_run"):
            thread._run = lambda: True  # its loop ends at its next wake-up, without touching any process


def _cluster_environment(trainer: L.Trainer):
    return getattr(trainer.strategy, "cluster_environment", None) or getattr(
        getattr(trainer, "_accelerator_connector", None), "cluster_environment", None)


class Preemption(L.Callback):
    """Stop every rank at the optimizer-step boundary after one of ``signals`` reached any rank; ``last.ckpt``; 75.

    Args:
        signals: signal names (or numbers) that mean "stop and save": SIGTERM (Kubernetes, spot instances,
            ``torchrun`` / SLURM at the end) and SIGUSR1 (SLURM's ``--signal=USR1@<s>`` warning).
        every_n_steps: agree on the stop every N optimizer steps (one tiny all-reduce each time; on GPUs it also
            waits for the step to finish). 1: stop at the very next step boundary.
        slurm_requeue: under SLURM with Lightning's ``SLURMEnvironment(auto_requeue=True)`` (its default), requeue
            the job when the run stopped on the plugin's ``requeue_signal``.
    """

    def __init__(self, signals: Sequence[str | int] = ("SIGTERM", "SIGUSR1"), every_n_steps: int = 1,
                 slurm_requeue: bool = True):
        self.signals = parse_signals(signals)
        if int(every_n_steps) < 1:
            raise ConfigError(f"callbacks.preemption.every_n_steps must be >= 1, got {every_n_steps}")
        self.every_n_steps = int(every_n_steps)
        self.slurm_requeue = bool(slurm_requeue)
        self.received: int = 0  # the first signal this process received (0: none)
        self._previous: dict[signal.Signals, object] = {}
        self._checked_step: int | None = None
        self._stopping = False

    # --- handlers -------------------------------------------------------------------------------------------
    def _on_signal(self, signum: int, _frame) -> None:
        # Only a flag: no logging, I/O or collective here (it interrupts whatever the main thread was doing).
        if not self.received:
            self.received = int(signum)

    def _install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            log.warning("preemption: not on the main thread, signal handlers not installed")
            return
        for sig in self.signals:
            previous = signal.signal(sig, self._on_signal)
            self._previous.setdefault(sig, previous)

    def _restore(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig, previous in self._previous.items():
                signal.signal(sig, previous)  # type: ignore[arg-type]
        self._previous = {}

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        self.received, self._stopping = 0, False
        self._install()
        connector = getattr(trainer, "_signal_connector", None)  # Lightning registers its handlers after setup
        if connector is not None and not getattr(connector, "_preemption_wrapped", False):
            register = connector.register_signal_handlers

            def register_then_ours() -> None:
                register()
                self._install()  # ours over Lightning's for our signals; its teardown puts ours back, ours the rest

            connector.register_signal_handlers = register_then_ours
            connector._preemption_wrapped = True

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._restore()

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        if not self._stopping:  # our own stop keeps the flag-only handler: a second SIGTERM must not cut the exit
            self._restore()

    # --- the step boundary ----------------------------------------------------------------------------------
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._checked_step = trainer.global_step

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        step = trainer.global_step
        if step == self._checked_step or step % self.every_n_steps:  # mid gradient accumulation, or not yet
            return
        self._checked_step = step
        signum = self._agreed(trainer)
        if signum:
            self._stop(trainer, signum)

    def _agreed(self, trainer: L.Trainer) -> int:
        """The signal any rank received (0: none): the same answer on every rank, at the same step."""
        if not (dist.is_available() and dist.is_initialized() and trainer.world_size > 1):
            return self.received
        flag = torch.tensor([self.received], dtype=torch.int64, device=trainer.strategy.root_device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item())

    def _stop(self, trainer: L.Trainer, signum: int) -> None:
        name = signal.Signals(signum).name
        step = trainer.global_step
        origin = "this rank" if self.received else "another rank"
        log.warning("preemption: %s received (on %s): stopping after optimizer step %d", name, origin, step)
        self._stopping = True
        if trainer.is_global_zero:
            quiet_launcher_observer()
        savers = [c for c in trainer.checkpoint_callbacks if isinstance(c, LastCheckpoint)]
        path = savers[0].save_now(trainer) if savers else None  # every rank: the save is collective
        environment = _cluster_environment(trainer)
        if (trainer.is_global_zero and self.slurm_requeue and isinstance(environment, SLURMEnvironment)
                and environment.auto_requeue and signum == environment.requeue_signal):
            requeue_slurm_job()
        rank = f"rank {trainer.global_rank}: " if trainer.world_size > 1 else ""
        if path is None:
            raise Preempted(f"{rank}{name} at step {step}: no checkpoint written (no last_checkpoint callback, or "
                            "a run that writes none)")
        run_dir = Path(path).parent.parent
        raise Preempted(f"{rank}{name}: stopped after optimizer step {step}, {path} written; continue with the same "
                        f"command plus hydra.run.dir={run_dir} ckpt_path=last (exit code 75)")
