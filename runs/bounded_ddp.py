"""How a multi-rank run ends: a lost rank stops the others in bounded time with one line; a clean run exits 0.

A lost rank otherwise leaves the others a long gloo traceback, a SIGKILL or a 30-minute wait. Every collective times
out after ``trainer.collective_timeout_s`` and rank 0 watches its child ranks. After a clean ``train()`` the process
group is destroyed before Python's teardown, where gloo aborts (exit -6).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist
from lightning.pytorch.strategies import DDPStrategy

from sts_lightning.embeddings import stop_request
from sts_lightning.embeddings.errors import EXIT_RANK_LOST, Preempted, RankLostError
from sts_lightning.embeddings.stop_request import StopRequested, signal_name
from sts_lightning.runs.compat import WatchesChildRanks, child_processes

DEFAULT_TIMEOUT_S = 1800.0  # torch's own default: longer than any single-rank stretch (rank 0's STS evaluation, export)
GRACE_S = 10.0  # how long rank 0 may take to notice a dead child rank by itself before its observer ends it
# What gloo / NCCL / the TCP store say when a peer is gone or silent (the text of their RuntimeErrors).
_LOST = ("connection reset by peer", "connection closed by peer", "broken pipe", "timed out", "timeout",
         "nccl communicator was aborted", "socket", "connection refused")
_BACKENDS = ("gloo", "nccl", "c10d")  # their errors name their source file; a DataLoader's timeout does not
_REPORTED = threading.Lock()  # one line per process: whichever of the training thread and the observer is first
_clean = False  # the last train() in this process ended without an error: no collective is left queued
_registered = False


def how_it_ended(code: int) -> str:
    """A child rank's return code in words (``-9``: SIGKILL, what the kernel's OOM killer sends)."""
    if code >= 0:
        return f"died (exit code {code})"
    return f"died (killed by {signal_name(-code)}{', as the OOM killer does' if code == -signal.SIGKILL else ''})"


class _ChildWatch(threading.Thread):
    """Rank 0's observer of its child ranks: once one failed, if rank 0 has not stopped by itself ``grace_s`` later,
    prints the one line, kills the other children and exits 69."""

    def __init__(self, procs: list, resume: str, grace_s: float = GRACE_S):
        super().__init__(daemon=True, name="rank-watch")
        self.procs, self.resume, self.grace_s = procs, resume, grace_s
        self.lost: tuple[int, str] | None = None  # (rank, how it ended)

    def run(self) -> None:
        while self.lost is None:
            time.sleep(0.5)
            codes = [proc.poll() for proc in self.procs]
            if all(code == 0 for code in codes):
                return
            self.lost = next(((i + 1, how_it_ended(c)) for i, c in enumerate(codes) if c), None)
        time.sleep(self.grace_s)
        if _REPORTED.acquire(blocking=False):
            rank, ended = self.lost
            print(f"error: {lost_rank_message(rank, ended, 0, len(self.procs) + 1, None, self.resume)}",
                  file=sys.stderr, flush=True)
            kill_children(self.procs)
            os._exit(EXIT_RANK_LOST)


def wait_for_children(procs: list, grace_s: float = GRACE_S) -> None:
    """Give the child ranks ``grace_s`` to stop by themselves, then SIGKILL those still running."""
    deadline = time.monotonic() + grace_s
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    kill_children(procs)


def kill_children(procs: list) -> None:
    """SIGKILL every child rank still running (a hung one would otherwise outlive rank 0)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)


class BoundedDDPStrategy(WatchesChildRanks, DDPStrategy):
    """``DDPStrategy`` (numerically the same) with ``collective_timeout_s`` and rank 0's own observer."""

    def __init__(self, collective_timeout_s: float = DEFAULT_TIMEOUT_S, **kwargs):
        super().__init__(timeout=timedelta(seconds=float(collective_timeout_s)), **kwargs)
        self.collective_timeout_s = float(collective_timeout_s)
        self.resume = ""  # the resume hint the observer prints (set by stop_on_lost_rank)
        self.watch: _ChildWatch | None = None

    def watch_children(self, procs: list) -> None:
        self.watch = _ChildWatch(procs, self.resume)
        self.watch.start()


def _lost_cause(err: BaseException) -> str | None:
    """The communication failure's own words when ``err`` (or what caused it) is one, else None."""
    seen = err
    while seen is not None:
        text = str(seen).strip()
        low = text.lower()
        backend = isinstance(seen, RuntimeError) and any(name in low for name in _BACKENDS)
        if isinstance(seen, dist.DistError) or (backend and any(marker in low for marker in _LOST)):
            first = text.splitlines()[0] if text else type(seen).__name__
            return first.split("] ", 1)[-1].split(". This is typically")[0][:160]
        seen = seen.__cause__ or seen.__context__
    return None


def lost_rank_message(rank: int | None, ended: str, me: int, world: int, step: int | None, resume: str) -> str:
    """The one line: which rank, what happened to it, where this rank stopped, how to resume."""
    who = f"rank {rank} of {world}" if rank is not None else f"another rank of {world}"
    at = f" at step {step}" if step is not None else ""
    return (f"{who} {ended}{at}; rank {me} stopped too (exit {EXIT_RANK_LOST}). {resume}")


def resume_hint(output_dir: Path) -> str:
    return (f"Resume with the same command plus hydra.run.dir={output_dir} ckpt_path=last "
            f"(last.ckpt: {'present' if (output_dir / 'checkpoints' / 'last.ckpt').is_file() else 'none yet'})")


@contextmanager
def stop_on_lost_rank(trainer, output_dir: Path) -> Iterator[None]:
    """Run a DDP stretch (``fit``, the export barrier); a lost peer becomes :class:`RankLostError` (one line), or a
    stop (75) when this rank was signalled too. Rank 0 kills hung child ranks, so no process is left behind."""
    strategy = trainer.strategy
    if isinstance(strategy, BoundedDDPStrategy):
        strategy.resume = resume_hint(output_dir)
    try:
        yield
    except RankLostError:
        raise
    except Preempted:  # rank 0 of Lightning's launcher ends after its child ranks: none left writing behind it
        wait_for_children(child_processes(strategy))
        raise
    except Exception as err:  # noqa: BLE001 -- re-raised unless it is a lost peer
        cause = _lost_cause(err) if trainer.world_size > 1 else None
        if cause is None:
            raise
        if stop_request.received():  # this rank was signalled too: the peer stopped first (a stop it did alone)
            stop = StopRequested(stop_request.received())
            stop.describe(f"rank {trainer.global_rank}: {stop.signal_name}; another rank stopped first ({cause}). "
                          f"{resume_hint(output_dir)} (exit code 75)")
            raise stop from None
        _REPORTED.acquire()  # the observer prints nothing now: this error is the line
        timeout = getattr(strategy, "collective_timeout_s", None)
        watch = getattr(strategy, "watch", None)
        if watch is not None and watch.lost is None:
            time.sleep(1.0)  # the peer's socket closed as it died: let the observer see its return code
        if watch is not None and watch.lost is not None:
            rank, ended = watch.lost
        else:
            rank = 1 - trainer.global_rank if trainer.world_size == 2 else None
            silent = "timed out" in cause.lower() or "timeout" in cause.lower()
            ended = (f"stopped responding (no collective answer in {timeout:g} s, trainer.collective_timeout_s)"
                     if silent and timeout else f"is gone ({cause})")
        kill_children(child_processes(strategy))
        raise RankLostError(lost_rank_message(rank, ended, trainer.global_rank, trainer.world_size,
                                              trainer.global_step, resume_hint(output_dir))) from None


def group_in_use() -> None:
    """A ``train()`` starts: until it ends cleanly, the exit handler leaves the process group alone."""
    global _clean
    _clean = False


def release_group_at_exit() -> None:
    """A ``train()`` ended cleanly on this rank: destroy the process group when the process exits."""
    global _clean, _registered
    if not (dist.is_available() and dist.is_initialized()):
        return
    _clean = True
    if not _registered:
        atexit.register(release_group)
        _registered = True


def release_group() -> None:
    """Collect the cycles that hold the group, then destroy it, unless a collective may still be queued."""
    if _clean and dist.is_available() and dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()
