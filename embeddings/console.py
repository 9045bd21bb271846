"""What a run prints: one line per event, readable in a terminal and in a log file alike.

Why: ``make run > log`` used to print nothing for minutes (tqdm bars and Lightning's bar write ``\\r``
updates into a block-buffered file), every Lightning INFO line appeared twice (Lightning's own handler
plus Hydra's root handler), and Lightning's "Tip: try installing ..." adverts sat between the results.
``configure_console`` fixes all three once per process; ``progress`` is the loop wrapper long passes
use: a tqdm bar on a terminal, a log line every ``every_s`` seconds otherwise.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import warnings
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)

ADVERT_MARKERS = ("💡 Tip:", "litlogger", "litmodels")
LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric", "lightning_fabric", "pytorch_lightning")
QUIET_WARNINGS = (r".*isinstance\(treespec, LeafSpec\).*",)


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
             disable: bool = False, every_s: float = 30.0) -> Iterable[T]:
    """A tqdm bar on a terminal; off a terminal, a log line at most every ``every_s`` seconds and at the end."""
    if disable:
        return iterable
    if interactive():
        from tqdm import tqdm

        return tqdm(iterable, desc=desc, total=total, unit=unit)
    return _logged(iterable, desc, total if total is not None else _length(iterable), unit, every_s)


def _length(iterable: Iterable) -> int | None:
    try:
        return len(iterable)  # type: ignore[arg-type]
    except TypeError:
        return None


def _logged(iterable: Iterable[T], desc: str, total: int | None, unit: str, every_s: float) -> Iterator[T]:
    """Log lines for a loop off a terminal: one as it starts (no phase is silent), then every ``every_s``."""
    log.info("%s", f"{desc}: {total} {unit} to go" if total else f"{desc}: started")
    start = last = time.monotonic()
    done = 0
    for item in iterable:
        yield item
        done += 1
        now = time.monotonic()
        if now - last >= every_s:
            last = now
            log.info("%s", progress_line(desc, done, total, now - start, unit))
    if done and time.monotonic() - start >= every_s:
        log.info("%s", progress_line(desc, done, total, time.monotonic() - start, unit))


def progress_line(desc: str, done: int, total: int | None, elapsed: float, unit: str = "batch") -> str:
    """``desc: 120/300 batch (40%), 2m05s elapsed, ~3m08s left`` (no total: count and elapsed only)."""
    text = f"{desc}: {done}/{total} {unit}" if total else f"{desc}: {done} {unit}"
    if total:
        text += f" ({100 * done / total:.0f}%), {_clock(elapsed)} elapsed"
        if done:
            text += f", ~{_clock(elapsed * (total - done) / done)} left"
    else:
        text += f", {_clock(elapsed)} elapsed"
    return text


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
