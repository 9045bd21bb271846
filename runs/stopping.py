"""A SIGTERM / SIGUSR1 honoured in every phase of ``train()``, not only between optimizer steps (issue 38).

Why here: the preemption callback sees only what happens inside ``trainer.fit``. ``train()`` listens to the
callback's signals from its first line (``embeddings.stop_request.listening``), so a signal while the model is
built, while a cache is built before step 1 (``prepare_data``), during the fit or during the export is recorded,
and the loops of those phases stop at their next batch with ``StopRequested`` (exit 75). Stops inside the fit are
described by the callback (what it saved); the rest -- before the fit, during the export -- here.

The export runs on rank 0 while the other ranks wait: instead of a barrier, rank 0 broadcasts whether it was
stopped, so every rank ends with 75 instead of the waiting ones seeing a lost peer (exit 69).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig

from sts_lightning.callbacks.preemption import parse_signals, resume_line
from sts_lightning.embeddings.stop_request import StopRequested, check_stop

DEFAULT_SIGNALS = ("SIGTERM", "SIGUSR1")  # configs/callbacks/default.yaml and Preemption's own default


def preemption_signals(cfg: DictConfig) -> list[signal.Signals]:
    """The signals ``callbacks.preemption`` stops on; none when that callback is switched off."""
    node = (cfg.get("callbacks") or {}).get("preemption")
    if not node or "_target_" not in node:
        return []
    return parse_signals(node.get("signals") or DEFAULT_SIGNALS)


def describe_stop(stop: StopRequested, output_dir: Path, ckpt_path: str | None) -> None:
    """The one line of a stop outside the fit (a no-op when the callback already described it)."""
    last = output_dir / "checkpoints" / "last.ckpt"
    if last.is_file():
        done = " (training had finished: the resumed run writes the export)" if "export" in stop.where else ""
        stop.describe(f"{stop.message}: stopped, {last} holds the last finished optimizer step{done}; "
                      f"{resume_line(output_dir, str(last), ckpt_path)}")
    else:
        stop.describe(f"{stop.message}: stopped before the first optimizer step, nothing to save; "
                      f"{resume_line(output_dir, None, ckpt_path)}")


def export_on_rank_zero(trainer, write: Callable[[], object]) -> None:
    """``write()`` on rank 0; every rank ends when it ends, and all raise ``StopRequested`` when it was stopped."""
    stopped: StopRequested | None = None
    if trainer.is_global_zero:
        try:
            check_stop("writing the export")
            write()
        except StopRequested as stop:
            stopped = stop
    signum = trainer.strategy.broadcast(stopped.signum if stopped else 0, src=0)  # also the ranks' barrier
    if signum:
        raise stopped or StopRequested(signum, "writing the export (on rank 0)")
