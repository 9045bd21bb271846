"""Say which budget ends a run, ``trainer.max_steps`` or ``trainer.max_epochs``, before it starts and after: Lightning
stops at whichever comes first and says nothing about the other.
"""

from __future__ import annotations

import logging
import math

import lightning as L

log = logging.getLogger(__name__)


def steps_per_epoch(trainer: L.Trainer) -> int | None:
    """Optimizer steps an epoch gives (``None``: a stream of unknown length)."""
    batches = trainer.num_training_batches
    if batches in (None, float("inf")):
        return None
    return math.ceil(int(batches) / max(1, int(trainer.accumulate_grad_batches)))


def unreachable_steps_note(max_steps: int, max_epochs: int | None, per_epoch: int | None) -> str | None:
    """The warning when ``max_epochs`` ends the run before ``max_steps`` (``None`` when it does not)."""
    if max_steps is None or max_steps < 0 or max_epochs is None or max_epochs < 0 or per_epoch is None:
        return None
    reachable = max_epochs * per_epoch
    if reachable >= max_steps:
        return None
    return (f"trainer.max_steps={max_steps} will not be reached: trainer.max_epochs={max_epochs} x {per_epoch} "
            f"steps an epoch ends the run at step {reachable}. Add trainer.max_epochs=-1 to train by steps.")


def stop_reason(max_steps: int, max_epochs: int | None, global_step: int, per_epoch: int | None) -> str:
    """One line: how many steps (and epochs) ran, and which budget stopped the run."""
    epochs = f"{global_step / per_epoch:.2f} epochs" if per_epoch else "epochs of unknown length"
    done = f"{global_step} optimizer steps ({epochs})"
    if max_steps is not None and max_steps >= 0 and global_step >= max_steps:
        return f"{done}: stopped by trainer.max_steps={max_steps}"
    if max_epochs is not None and max_epochs >= 0 and per_epoch and global_step >= max_epochs * per_epoch:
        left = f"; trainer.max_steps={max_steps} was not reached" if max_steps is not None and max_steps >= 0 else ""
        return f"{done}: stopped by trainer.max_epochs={max_epochs}{left}"
    return f"{done}: stopped before trainer.max_steps / max_epochs (max_time, early stopping or an interrupt)"


class StepBudget(L.Callback):
    """Warn before the first step when ``max_steps`` is out of reach; keep the stop line for the run summary."""

    def __init__(self) -> None:
        self.summary: str | None = None

    def _budgets(self, trainer: L.Trainer) -> tuple[int, int | None, int | None]:
        return int(trainer.max_steps), trainer.max_epochs, steps_per_epoch(trainer)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        note = unreachable_steps_note(*self._budgets(trainer))
        if note and trainer.is_global_zero:
            log.warning("%s", note)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        max_steps, max_epochs, per_epoch = self._budgets(trainer)
        self.summary = stop_reason(max_steps, max_epochs, int(trainer.global_step), per_epoch)
