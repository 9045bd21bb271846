"""The stop path's flag: a SIGTERM / SIGUSR1 recorded by the handler, honoured between the batches of every loop.

A handler interrupts whatever runs, so it only records; long loops call :func:`check_stop` between batches, which
raises :class:`StopRequested` (exit 75). Inside a :func:`stretch` with ``agree`` each check asks every rank, so all
stop at the same batch. The whole path: docs/reliability.md, "The stop path".
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
    """Forget the signal (a new ``train()``; tests)."""
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
    """Record ``signals`` for the stretch (a whole ``train()``), starting from none. A stop keeps the recording
    handler: a second SIGTERM must not cut the exit short (143, its message unprinted)."""
    clear()
    previous = install(list(signals))
    try:
        yield
    except Preempted:
        raise
    except BaseException:
        restore(previous)
        raise
    restore(previous)
    clear()


def signal_name(signum: int) -> str:
    """``15`` -> ``"SIGTERM"``; a number no signal has -> ``"signal <n>"``."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class StopRequested(Preempted):
    """A signal was seen between two batches of ``where``; ``describe`` adds what was saved and how to resume."""

    def __init__(self, signum: int, where: str = ""):
        self.signum, self.where = int(signum), where
        super().__init__(f"{self.signal_name}{f' while {where}' if where else ''}")
        self.described = False

    @property
    def signal_name(self) -> str:
        return signal_name(self.signum)

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
    """End the process now (``os._exit``, logs flushed) when ``stop`` is a preempted run's exit (75): the teardown of
    torch, transformers and Lightning can take a third of a 30 s grace period. For entry scripts only."""
    if stop.code != EXIT_PREEMPTED:
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_PREEMPTED)
