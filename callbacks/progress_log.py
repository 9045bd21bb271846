"""Training progress as log lines when there is no progress bar (stdout is a file or a pipe, where Lightning's
``\\r`` redraws show nothing useful), on rank 0; whatever the console, when step 1 starts and how long that took.
"""

from __future__ import annotations

import logging
import time

import lightning as L
import torch

from sts_lightning.callbacks.sts_metrics import spearman_line
from sts_lightning.embeddings.console import clock, progress_line

log = logging.getLogger(__name__)


class LogProgress(L.Callback):
    """Log ``train: 120/400 steps (30%), 1m02s elapsed, ~2m25s left | loss 1.234`` every ``every_s`` seconds."""

    def __init__(self, every_s: float = 30.0) -> None:
        if every_s <= 0:
            raise ValueError(f"every_s must be > 0, got {every_s}")
        self.every_s = float(every_s)
        self.active = False
        self._start = self._last = 0.0
        self.estimate_s: float | None = None  # set by train(): the estimate printed before the work started
        self.estimated_at: float | None = None  # time.monotonic() when it was printed
        self._first_step_seen = False

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.active = trainer.progress_bar_callback is None and trainer.is_global_zero
        self._start = self._last = time.monotonic()
        if self.active:
            log.info("training: %s optimizer steps (a progress line every %.0f s)",
                     _total(trainer) or "?", self.every_s)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        if self._first_step_seen:
            return
        self._first_step_seen = True
        if trainer.is_global_zero:
            log.info("%s", first_step_line(trainer.global_step + 1, since_launch_s(), self.estimate_s,
                                           None if self.estimated_at is None else time.monotonic() - self.estimated_at))

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        if not self.active:
            return
        now = time.monotonic()
        total = _total(trainer)
        if now - self._last < self.every_s and trainer.global_step != total:
            return
        self._last = now
        line = progress_line("train", trainer.global_step, total, now - self._start, "steps")
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if isinstance(loss, torch.Tensor):
            line += f" | loss {loss.detach().float().item():.4f}"
        log.info("%s", line)

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.active and not trainer.sanity_checking:
            log.info("STS evaluation at step %d ...", trainer.global_step)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self.active or trainer.sanity_checking:
            return
        scores = spearman_line(trainer.callback_metrics)
        if scores:
            log.info("STS Spearman x100 at step %d: %s", trainer.global_step, scores)


def _total(trainer: L.Trainer) -> int | None:
    total = trainer.estimated_stepping_batches
    return int(total) if total not in (None, float("inf")) else None


def first_step_line(step: int, since_launch: float, estimate: float | None, since_estimate: float | None) -> str:
    """``step 1 starts 2m31s after launch (2m05s after the estimate of ~2m10s)``."""
    text = f"step {step} starts {clock(since_launch)} after launch"
    if estimate is not None and since_estimate is not None:
        text += f" ({clock(since_estimate)} after the estimate of ~{clock(estimate)})"
    return text


def run_begins() -> None:
    """``train()`` calls it as it starts: a later run of the process (a seed, a stage) counts from its own start."""
    global _runs, _launched
    _runs += 1
    _launched = None if _runs == 1 else time.monotonic()


def since_launch_s() -> float:
    return process_age_s() if _launched is None else time.monotonic() - _launched


def process_age_s() -> float:
    """Seconds since this process started (the user's command, imports included); psutil, else this module's import."""
    try:
        import psutil

        return time.time() - psutil.Process().create_time()
    except (ImportError, OSError):
        return time.monotonic() - _IMPORTED


_IMPORTED = time.monotonic()
_runs = 0  # train() calls in this process so far
_launched: float | None = None  # time.monotonic() when this process's latest run began (None: its first run)
