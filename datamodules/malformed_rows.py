"""Skipped rows of one input file: counted per reason with their first line numbers, and the one threshold policy
(``max_malformed_fraction``) every reader of labelled rows shares.
"""

from __future__ import annotations

import logging
from collections import Counter

from sts_lightning.embeddings.errors import DataError

log = logging.getLogger(__name__)

SHOW_LINES = 5  # line numbers quoted per skip reason


class MalformedRows:
    """Counts into ``skipped`` (the caller's result keeps that Counter) and keeps the first line numbers per reason."""

    def __init__(self, skipped: Counter, max_malformed_fraction: float) -> None:
        self.skipped = skipped
        self.max_bad = max_malformed_fraction
        self.where: dict[str, list[int | str]] = {}

    def skip(self, lineno: int | str, reason: str) -> None:
        """Count one bad row; ``lineno`` is a line number, or a place already named (``"row 7"``, ``"line 3"``)."""
        self.skipped[reason] += 1
        lines = self.where.setdefault(reason, [])
        if len(lines) < SHOW_LINES:
            lines.append(lineno)

    def check(self, source: str, kept: int, hint: str = "") -> None:
        """Warn about the skipped rows, or raise a ``DataError`` above ``max_malformed_fraction`` of all rows."""
        bad = sum(self.skipped.values())
        if not bad:
            return
        total = bad + kept
        detail = "; ".join(f"{reason}: {n} ({_places(self.where[reason])}{', ...' if n > SHOW_LINES else ''})"
                           for reason, n in self.skipped.items())
        message = f"{source}: skipped {bad} of {total} rows as malformed: {detail}"
        if bad > self.max_bad * total:
            raise DataError(f"{message}. That is more than max_malformed_fraction="
                            f"{self.max_bad:g}: fix the file or raise the limit.{' ' + hint if hint else ''}")
        log.warning(message)


def _places(where: list[int | str]) -> str:
    """``line 3, 9`` for line numbers; named places with their common words once: ``row 3, 9, b.parquet row 2``."""
    out, last = [], None
    for place in where:
        words, _, number = (place if isinstance(place, str) else f"line {place}").rpartition(" ")
        out.append(number if words == last else f"{words} {number}".strip())
        last = words
    return ", ".join(out)
