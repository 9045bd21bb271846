"""A stop asked for by a signal (SIGTERM / SIGUSR1), honoured between the batches of every long loop.

Why: the step-boundary stop (``callbacks/preemption.py``) sees a signal only while optimizer steps run; measured
(issue 38), ``kill -TERM`` during the STS scoring before training stopped ``train.py experiment=quickstart`` 79 s
later, and a signal during a cache build or the export killed the process outright (exit 143, no resume line).
Kubernetes and SLURM give 30 s before SIGKILL. A signal handler may only record (it interrupts whatever runs), so
``_record`` stores the signal number and the loops that can run long -- the encoder's batch loop (every STS
evaluation, the feature and distillation caches), the token-state cache, the sentence-index scan, the export --
call :func:`check_stop` between batches: one global read when nothing was received. It raises
:class:`StopRequested`, a ``Preempted`` (a ``SystemExit`` with exit code 75, so no ``except Exception`` on the way
treats it as a failure); the code that runs the phase (``runs.train_run``, the preemption callback) saves what
there is to save and completes its message with the resume command.

Several ranks: a stretch in which every rank runs the same loop in step (an STS evaluation: every rank encodes an
equally long shard) runs inside :func:`stretch` with ``agree``, a function that turns this rank's signal into the one every rank
sees (an all-reduce), so all ranks stop at the same batch and none waits for ever in a collective. Outside such a
stretch the check is this rank's own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator

from sts_lightning.embeddings.errors import EXIT_PREEMPTED, Preempted

_received = 0  # the first signal this process received since listening began (0: none)
_agree: Callable[[int], int] | None = None  # inside an agreed stretch: this rank's signal -> every rank's
_where = ""  # the phase running (``stretch``), for the stop's message


def _record(signum: int, _frame) -> None:
    """The handler: only a flag (no logging, I/O or collective: it interrupts whatever the main thread does)."""
    global _received
    if not _received:
        _received = int(signum)


def received() -> int:
    """The signal received since :func:`listening` began (0: none)."""
    return _received


def request(signum: int) -> None:
    """Record ``signum`` as if it had arrived (what the handler does; for tests and callers that stop by hand)."""
    _record(signum, None)


def clear() -> None:
    global _received
    _received = 0


def install(signals: Iterable[signal.Signals]) -> dict[signal.Signals, object]:
    """Point ``signals`` at the recording handler (main thread only); returns the handlers it replaced."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, _record) for sig in signals}


def restore(previous: dict[signal.Signals, object]) -> None:
    if threading.current_thread() is threading.main_thread():
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


@contextlib.contextmanager
def listening(signals: Iterable[signal.Signals]) -> Iterator[None]:
    """Record ``signals`` for the stretch (a whole ``train()``: data, caches, fit, export), starting from none.

    A stop keeps the recording handler after the stretch: the process is on its way out with exit 75, and a
    second SIGTERM must not cut that short (143, its message unprinted).
    """
    clear()
    previous = install(list(signals))
    try:
        yield
    except Preempted:
        raise
    except BaseException:
        restore(previous)
        raise
    else:
        restore(previous)
        clear()


class StopRequested(Preempted):
    """A signal was seen between two batches of ``where``; ``describe`` adds what was saved and how to resume."""

    def __init__(self, signum: int, where: str = ""):
        self.signum, self.where = int(signum), where
        super().__init__(f"{self.signal_name}{f' while {where}' if where else ''}")
        self.described = False

    @property
    def signal_name(self) -> str:
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"

    def describe(self, message: str) -> None:
        """Set the one line ``run_or_exit`` prints (``stopped: <message>``); the first description wins."""
        if not self.described:
            self.message, self.described = message, True


def check_stop(where: str = "") -> None:
    """Raise :class:`StopRequested` when a stop signal was received (on any rank, inside an agreed stretch);
    ``where`` names the phase (default: the innermost :func:`stretch`'s)."""
    signum = _received if _agree is None else _agree(_received)
    if signum:
        raise StopRequested(signum, where or _where)


@contextlib.contextmanager
def stretch(where: str, agree: Callable[[int], int] | None = None) -> Iterator[None]:
    """A phase whose loops call :func:`check_stop`: ``where`` names it in the stop's message; with ``agree``
    (every rank runs the same checks in step: an STS evaluation), each check asks every rank (a collective)."""
    global _agree, _where
    outer = _agree, _where
    _agree, _where = agree if agree is not None else _agree, where
    try:
        yield
    finally:
        _agree, _where = outer


def exit_at_once_if_preempted(stop: SystemExit) -> None:
    """End the process now (``os._exit``) when ``stop`` is a preempted run's exit (75), after flushing the logs.

    Why: measured on 2 loaded cores (load 14), the interpreter's own teardown after ``sys.exit`` -- freeing torch,
    transformers and Lightning -- took 10 s (0.3 s with ``os._exit``), a third of a 30 s grace period, after the
    checkpoint was already written. Everything that matters is done by then: the checkpoint and caches renamed into
    place (or their temporary copies removed), the loggers finalised, W&B finished, the ``stopped:`` line printed.
    For entry scripts only (``train.py``'s ``__main__``): in a test or a library call the ``SystemExit`` stays.
    """
    if stop.code != EXIT_PREEMPTED:
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_PREEMPTED)
