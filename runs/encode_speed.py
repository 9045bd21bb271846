"""Each encoder's speed on this machine, measured on ``SAMPLE`` made-up sentences before the work (``runs.first_step``):
a compute count misses short batches, tokenizing and other engines by a factor that differs per machine.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from sts_lightning.embeddings.isolated_rng import isolated_rng
from sts_lightning.embeddings.sources.build import build_source
from sts_lightning.embeddings.stop_request import check_stop

log = logging.getLogger(__name__)
SAMPLE = 64  # sentences a timed pass (the teachers' batch): per-call costs weigh on fewer
WORDS = ("the city was founded in the early years of the century by settlers who came from the north and built "
         "a small church near the river where the old road crossed the water before the railway reached the town "
         "and its people began to work in the mills that made cloth for markets across the country").split()


def sample_sentences(count: int, mean_chars: float, first: int = 0) -> list[str]:
    """``count`` distinct sentences of about ``mean_chars`` characters (a word at least), numbered from ``first``."""
    out = []
    for i in range(first, first + count):
        words, length, j = [], -1, i
        while not words or length + 1 + len(WORDS[j % len(WORDS)]) <= max(mean_chars, 1):
            words.append(WORDS[j % len(WORDS)])
            length += 1 + len(words[-1])
            j += 1
        out.append(f"{' '.join(words)} {i}")  # the number keeps two sentences of one start apart
    return out


def seconds_per_sentence(embed: Callable[[Sequence[str]], object], mean_chars: float, count: int = SAMPLE) -> float:
    """Wall seconds per sentence of ``embed``: the faster of two passes (the first of a shape builds its kernels)."""
    best = float("inf")
    for sentences in (sample_sentences(count, mean_chars), sample_sentences(count, mean_chars, first=count)):
        start = time.perf_counter()
        embed(sentences)
        best = min(best, time.perf_counter() - start)
    return best / count


def measured_rates(work: Sequence[tuple[str, str, int, float]], device: str = "cpu",
                   build: Callable | None = None) -> dict[tuple[str, float], float]:
    """``{(encoder, mean chars): seconds per sentence}`` for each encoder of ``work`` that builds and encodes."""
    build = build or build_source
    rates: dict[tuple[str, float], float] = {}
    notes = []
    by_encoder: dict[str, set[float]] = {}
    for _, encoder, _, chars in work:
        by_encoder.setdefault(encoder, set()).add(round(float(chars), 1))
    for encoder, lengths in by_encoder.items():
        check_stop(f"timing {encoder} for the before-step-1 estimate")  # a SIGTERM here: no model load after it
        try:
            with isolated_rng():
                source = build(encoder, batch_size=SAMPLE, device=device)
                source.embed(sample_sentences(SAMPLE, max(lengths), first=2 * SAMPLE))  # untimed warm-up (above SAMPLE)
                for chars in sorted(lengths):
                    rates[(encoder, chars)] = seconds_per_sentence(source.embed, chars)
                    notes.append(f"{encoder} {1 / max(rates[(encoder, chars)], 1e-9):,.0f}/s at {chars:.0f} chars")
            del source
        except Exception as err:  # noqa: BLE001 -- an estimate never stops a run: the compute count stands in
            log.info("encoding speed: %s not timed (%s): its estimate is a compute count", encoder, err)
    if notes:
        log.info("encoding speed measured here (sentences a second, %d made-up sentences each): %s", SAMPLE,
                 ", ".join(notes))
    return rates


def rate_of(rates: dict[tuple[str, float], float], encoder: str, chars: float) -> float | None:
    return rates.get((encoder, round(float(chars), 1)))

