"""What a run prints: one line per event, readable in a terminal and in a log file alike.

``progress`` wraps a long loop (a tqdm bar on a terminal, else a log line every ``every_s`` seconds); ``phase`` gives
several loops ONE counter and checks for a stop between its items."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Iterator
from typing import TypeVar

from sts_lightning.embeddings.stop_request import check_stop

T = TypeVar("T")
log = logging.getLogger(__name__)

ADVERT_MARKERS = ("💡 Tip:", "litlogger", "litmodels")
LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric", "lightning_fabric", "pytorch_lightning")
QUIET_WARNINGS = (r".*isinstance\(treespec, LeafSpec\).*",)
LOG_EVERY_S = 5.0  # seconds between two progress lines off a terminal (30 s left a user wondering about a hang)


def interactive() -> bool:
    """True when both stdout and stderr are terminals (bars redraw in place); False for files and pipes."""
    return sys.stdout.isatty() and sys.stderr.isatty()


class _DropAdverts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.getMessage())
        return not any(marker in message for marker in ADVERT_MARKERS)


def configure_console() -> None:
    """Route Lightning's logging through the root handlers once, drop adverts, quiet bars off a terminal."""
    root_has_handlers = logging.getLogger().hasHandlers()
    for name in LIGHTNING_LOGGERS:
        logger = logging.getLogger(name)
        if root_has_handlers:  # Hydra's handlers print and write <run>/train.log: Lightning's own would double it
            for handler in list(logger.handlers):
                if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                    logger.removeHandler(handler)
            logger.propagate = True
        for origin in (f"{name}.utilities.rank_zero", name):
            target = logging.getLogger(origin)
            if not any(isinstance(f, _DropAdverts) for f in target.filters):
                target.addFilter(_DropAdverts())
    for pattern in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)
    if not interactive():
        os.environ.setdefault("TQDM_DISABLE", "1")  # library bars (transformers, datasets); ours log lines instead
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        except ImportError:  # transformers is a dependency; keep the console usable without it anyway
            pass


def progress(iterable: Iterable[T], desc: str, total: int | None = None, unit: str = "batch",
             disable: bool = False, every_s: float | None = None) -> Iterable[T]:
    """A tqdm bar on a terminal; off a terminal, a log line at most every ``every_s`` seconds and at the end; inside
    a ``Phase.part``, each item advances the phase's counter instead."""
    active = _ACTIVE.get()
    if active is not None and active.in_part:
        return active.feed(iterable, total if total is not None else _length(iterable))
    if disable:
        return iterable
    if interactive():
        from tqdm import tqdm

        return tqdm(iterable, desc=desc, total=total, unit=unit)
    return _logged(iterable, desc, total if total is not None else _length(iterable), unit,
                   LOG_EVERY_S if every_s is None else every_s)


def _length(iterable: Iterable) -> int | None:
    try:
        return len(iterable)  # type: ignore[arg-type]
    except TypeError:
        return None


def _logged(iterable: Iterable[T], desc: str, total: int | None, unit: str, every_s: float) -> Iterator[T]:
    """Log lines for a loop off a terminal: one as it starts, then every ``every_s`` (:class:`_Lines`)."""
    log.info("%s", f"{desc}: {total} {unit} to go" if total else f"{desc}: started")
    count = [0]
    lines = _Lines(lambda elapsed: progress_line(desc, count[0], total, elapsed, unit), every_s, lambda: count[0])
    try:
        for item in iterable:
            yield item
            count[0] += 1
            lines.log_if_due()
    finally:
        lines.close()
    if count[0] and lines.logged_at != count[0] and lines.elapsed() >= every_s:
        log.info("%s", lines.line(lines.elapsed()))  # the last count, unless its line just came


class _Lines:
    """``line(elapsed)`` logged at most every ``every_s`` seconds, by the loop and by a heartbeat thread (log only)."""

    def __init__(self, line, every_s: float, count=lambda: None) -> None:
        self.line, self.every_s, self.count = line, float(every_s), count
        self.start = self._last = time.monotonic()
        self.logged_at = None  # ``count()`` when the last line was logged
        self._lock, self._closed, self._ticker = threading.Lock(), threading.Event(), None
        if self.every_s >= 1:
            self._ticker = threading.Thread(target=self._heartbeat, name="progress-lines", daemon=True)
            self._ticker.start()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def log_if_due(self) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._last < self.every_s:
                return
            self._last = now
        self.logged_at = self.count()
        log.info("%s", self.line(now - self.start))

    def _heartbeat(self) -> None:
        while not self._closed.wait(self.every_s / 4):
            self.log_if_due()

    def close(self) -> None:
        self._closed.set()
        if self._ticker is not None:
            self._ticker.join(timeout=1.0)


def progress_line(desc: str, done: int, total: int | None, elapsed: float, unit: str = "batch") -> str:
    """``desc: 120/300 batch (40%), 2m05s elapsed, ~3m08s left`` (no total: count and elapsed only)."""
    text = f"{desc}: {done}/{total} {unit}" if total else f"{desc}: {done} {unit}"
    if total:
        text += f" ({100 * done / total:.0f}%), {clock(elapsed)} elapsed"
        if done:
            text += f", ~{clock(elapsed * (total - done) / done)} left"
    else:
        text += f", {clock(elapsed)} elapsed"
    return text


def clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


_ACTIVE: contextvars.ContextVar[Phase | None] = contextvars.ContextVar("sts_phase", default=None)


class Phase:
    """One counter over a whole phase of ``total`` units, advanced by ``part(size)`` over its loops' items; a part
    served from a cache counts as done but not as work when the time left is extrapolated."""

    def __init__(self, desc: str, total: int, unit: str = "sentences", every_s: float | None = None) -> None:
        self.desc, self.total, self.unit = desc, int(total), unit
        self.every_s = LOG_EVERY_S if every_s is None else float(every_s)
        self.done = 0.0
        self.skipped = 0.0  # units that needed no work (cached parts)
        self.in_part = False
        self._fed = False
        self._start = time.monotonic()
        self._bar, self._lines = None, None
        if interactive():
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=desc, unit=f" {unit}")
        else:
            log.info("%s", f"{desc}: {self.total:,} {unit} to go")
            self._lines = _Lines(self.line, self.every_s)  # a line while one batch runs long, too

    @contextlib.contextmanager
    def part(self, size: int) -> Iterator[None]:
        """A piece of ``size`` units; the loops inside advance the phase (see the class docstring)."""
        check_stop()  # a stop between two parts (one teacher and the next) ends the phase before the next one loads
        start, self._size, self._fed, self.in_part = self.done, float(size), False, True
        try:
            yield
        finally:
            self.in_part = False
        if not self._fed:
            self.skipped += start + size - self.done
        self._set(start + size)

    def feed(self, iterable: Iterable[T], items: int | None) -> Iterator[T]:
        """Yield ``iterable``'s items, each advancing the phase by its share of the current part."""
        step = self._size / items if items else 0.0
        for item in iterable:
            check_stop()  # between two batches, whatever engine runs the loop (the module docstring)
            yield item
            self._fed = True
            self._set(self.done + step)

    def _set(self, done: float) -> None:
        done = min(max(done, self.done), float(self.total))
        if self._bar is not None:
            self._bar.update(int(done) - int(self.done))
        self.done = done
        if self._lines is not None:
            self._lines.log_if_due()

    def line(self, elapsed: float) -> str:
        """``desc: 8,192/20,000 sentences (41%), 1m02s elapsed, ~1m29s left``; the time left from computed work."""
        done, total = int(self.done), self.total
        text = f"{self.desc}: {done:,}/{total:,} {self.unit} ({100 * done / max(total, 1):.0f}%), {clock(elapsed)} elapsed"
        worked = self.done - self.skipped
        if worked > 0 and done < total:
            text += f", ~{clock(elapsed * (total - self.done) / worked)} left"
        return text

    def close(self) -> None:
        if self._lines is not None:
            self._lines.close()
        if self._bar is not None:
            self._bar.close()
        else:
            log.info("%s", self.line(time.monotonic() - self._start))


@contextlib.contextmanager
def phase(desc: str, total: int, unit: str = "sentences", every_s: float | None = None) -> Iterator[Phase]:
    """``with phase("caching features", n) as counter: ... with counter.part(len(chunk)): encode(chunk)``."""
    counter = Phase(desc, total, unit, every_s)
    token = _ACTIVE.set(counter)
    try:
        yield counter
    finally:
        _ACTIVE.reset(token)
        counter.close()
