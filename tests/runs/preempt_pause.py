"""A test-only callback that holds a run at a chosen step until a real signal has arrived (for test_preemption).

Why: a signal sent from outside lands at a random point of a run; to check that the run stops exactly at the
step boundary after it, the run announces the step (``<marker_dir>/rank<r>.pid``, holding the rank's pid, so
the test can signal that one process) and the held ranks wait there until the ``Preemption`` callback has
recorded the signal. Ranks not held go on and wait in the step's gradient all-reduce, as a real run would.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from lightning.pytorch import Callback

from sts_lightning.callbacks.preemption import Preemption


class PauseAt(Callback):
    """At the start of optimizer step ``step + 1`` (``global_step == step``) write this rank's pid file; the
    ``hold_ranks`` then wait (at most ``timeout_s``) for the signal."""

    def __init__(self, step: int, marker_dir: str, hold_ranks: Sequence[int] = (0,), timeout_s: float = 300):
        self.step, self.marker_dir = int(step), Path(marker_dir)
        self.hold_ranks, self.timeout_s = {int(r) for r in hold_ranks}, float(timeout_s)
        self.done = False

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.done or trainer.global_step != self.step:
            return
        self.done = True
        rank = trainer.global_rank
        tmp = self.marker_dir / f".rank{rank}.pid.tmp"
        tmp.write_text(str(os.getpid()))
        os.replace(tmp, self.marker_dir / f"rank{rank}.pid")  # the test never reads a half-written pid
        if rank not in self.hold_ranks:
            return
        preemption = next(c for c in trainer.callbacks if isinstance(c, Preemption))
        deadline = time.monotonic() + self.timeout_s
        while not preemption.received:
            if time.monotonic() > deadline:
                raise TimeoutError(f"rank {rank}: no signal within {self.timeout_s} s at step {self.step}")
            time.sleep(0.02)
