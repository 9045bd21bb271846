"""The stop path in ``train()`` outside the fit, which the preemption callback does not see: the model or a cache
being built, the export (on rank 0 alone, which broadcasts whether it was stopped, so every rank ends 75, not 69).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig

from sts_lightning.callbacks.preemption import DEFAULT_SIGNALS, parse_signals, resume_line
from sts_lightning.embeddings.stop_request import StopRequested, check_stop


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
