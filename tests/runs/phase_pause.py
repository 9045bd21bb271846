"""Hold a ``train.py`` process at a stop check of one phase until a real signal has arrived (for test_stopping).

Why: a signal sent from outside lands at a random point; to check that each phase (the STS scoring before
training, a validation, the end scoring, a cache build, the export) stops at its next check with the right
checkpoint, the run announces that it reached the phase (``<dir>/rank<r>.pid``, holding the pid, so the test signals
exactly that process) and the held rank waits there, inside the phase, until its handler has recorded the signal;
the check it was about to make then sees it. Other ranks go on to their next check (a collective in an STS
evaluation), as they would.

``FAULT_PAUSE="<phase>:<n>:<ranks>"`` with ``FAULT_PAUSE_DIR=<dir>`` (read by ``tests.runs.fault_driver
--script``): ``<phase>`` is a ``check_stop`` phase name (``scoring STS``, ``caching features``, ``writing the
export``...); for ``scoring STS`` ``<n>`` says which evaluation (1: before training, 2: the next validation...);
``<ranks>``: the global ranks held, comma-separated (none: the marker only says when the phase began, for a
timing with the run going on: ``benchmarks/reliability/signal_phases.py``).
"""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path

from sts_lightning.embeddings import stop_request

# every module that calls check_stop (each imported it by name): the pause wraps it in all of them
CHECKERS = ("sts_lightning.embeddings.encoders.base", "sts_lightning.callbacks.sts_evaluation",
            "sts_lightning.embeddings.io.export_manifest", "sts_lightning.datamodules.token_state_cache",
            "sts_lightning.datamodules.line_scan", "sts_lightning.runs.stopping", "sts_lightning.embeddings.console",
            "sts_lightning.datamodules.distillation")


def _rank() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")))


def install(phase: str, n: int, ranks: set[int], marker_dir: Path, timeout_s: float = 300) -> None:
    from sts_lightning.callbacks.sts_evaluation import STSEvaluationCallback

    state = {"evaluations": 0, "done": False}
    evaluate = STSEvaluationCallback.evaluate

    def counted(self, trainer, pl_module, *args, **kwargs):
        state["evaluations"] += 1
        return evaluate(self, trainer, pl_module, *args, **kwargs)

    STSEvaluationCallback.evaluate = counted
    real = stop_request.check_stop

    def check(where: str = "") -> None:
        here = where or stop_request._where
        due = here == phase and (phase != "scoring STS" or state["evaluations"] == n)
        if due and not state["done"]:
            state["done"] = True
            rank = _rank()
            marker_dir.mkdir(parents=True, exist_ok=True)
            tmp = marker_dir / f".rank{rank}.pid.tmp"
            tmp.write_text(str(os.getpid()))
            os.replace(tmp, marker_dir / f"rank{rank}.pid")  # the test never reads a half-written pid
            deadline = time.monotonic() + timeout_s
            while rank in ranks and not stop_request.received():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"rank {rank}: no signal within {timeout_s} s in {phase!r}")
                time.sleep(0.02)
        real(where)

    for name in CHECKERS:
        module = importlib.import_module(name)
        module.check_stop = check


def install_from_env() -> None:
    spec = os.environ.get("FAULT_PAUSE")
    if not spec:
        return
    phase, n, ranks = spec.rsplit(":", 2)
    install(phase, int(n), {int(r) for r in ranks.split(",") if r}, Path(os.environ["FAULT_PAUSE_DIR"]))
