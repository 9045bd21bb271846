"""Paired differences between systems scored on the same pairs: a paired bootstrap 95% interval per task and for
the average over tasks (from the per-pair similarities of ``sts.predictions``).

Each resample draws pair indices ONCE for every system (``task_replicates``); the interval is the percentile one of
``spearman(a) - spearman(b)`` (``scipy.stats.bootstrap(..., paired=True)``); the average's is the mean of the tasks'.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sts_lightning.embeddings.errors import DataError
from sts_lightning.sts.bootstrap import (
    CONFIDENCE,
    percentile_interval,
    shared_replicates,
    spearman_of_counts,
)

AVG = "avg"


@dataclass(frozen=True)
class Difference:
    """``a - b`` in Spearman x100 and its paired 95% interval; ``same``: the interval contains 0 (the ``~`` mark)."""

    diff: float
    lo: float
    hi: float

    @property
    def same(self) -> bool:
        return bool(self.lo <= 0.0 <= self.hi) if np.isfinite(self.lo) and np.isfinite(self.hi) else False

    def cell(self) -> str:
        if not np.isfinite(self.diff):
            return "n/a"
        bounds = "" if not np.isfinite(self.lo) else f" [{self.lo:+.2f}, {self.hi:+.2f}]"
        return f"{self.diff:+.2f}{bounds}{'~' if self.same else ''}"


def pair_fingerprint(sentences1: Sequence[str], sentences2: Sequence[str], gold: np.ndarray) -> str:
    """SHA-256 of the pairs in scoring order with their gold scores: runs are comparable pair by pair when equal."""
    digest = hashlib.sha256()
    for s1, s2, g in zip(sentences1, sentences2, np.asarray(gold, dtype=np.float64).tolist(), strict=True):
        digest.update(f"{s1}\t{s2}\t{g!r}\n".encode())
    return digest.hexdigest()


def task_replicates(predictions: Sequence[np.ndarray], gold: np.ndarray, samples: int,
                    rng: np.random.Generator) -> np.ndarray:
    """(systems, samples) Spearman x100 of every system on the SAME resamples of the task's pairs."""
    gold = np.asarray(gold, dtype=np.float64)
    preds = [np.asarray(p, dtype=np.float64) for p in predictions]
    if any(p.shape != gold.shape for p in preds):
        raise DataError(f"predictions of {[p.size for p in preds]} pairs for {gold.size} gold scores")
    return shared_replicates(preds, gold, samples, rng)


def interval(replicates: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The percentile interval of the finite replicates (NaN, NaN when none is)."""
    lo, hi = percentile_interval(replicates, confidence)
    return (lo, hi)


def spearman(predicted: np.ndarray, gold: np.ndarray) -> float:
    """Spearman x100 of the full sample (every pair once): the point estimate the replicates bracket."""
    ones = np.ones((1, np.asarray(gold).size))
    return float(spearman_of_counts(np.asarray(predicted, float), np.asarray(gold, float), ones)[0])


def task_rng(seed: int, task: str) -> np.random.Generator:
    """The generator of one task's resamples: the same draws for a task whatever else a table holds."""
    return np.random.default_rng([seed, int.from_bytes(hashlib.sha256(task.encode()).digest()[:4], "little")])


@dataclass
class PairedTable:
    """Point Spearman and resample replicates per task (and ``avg``), per system index that has the task."""

    tasks: list[str]
    point: dict[str, dict[int, float]]  # task -> {system: Spearman x100}
    replicates: dict[str, dict[int, np.ndarray]]  # task -> {system: (samples,)}

    def difference(self, task: str, a: int, b: int) -> Difference | None:
        """System ``a`` minus ``b`` on ``task`` (or ``avg``) with its paired 95% interval; None when one lacks the task."""
        point, reps = self.point.get(task, {}), self.replicates.get(task, {})
        if a not in point or b not in point:
            return None
        lo, hi = interval(reps[a] - reps[b])
        return Difference(point[a] - point[b], lo, hi)


def paired_table(predictions: Sequence[Mapping[str, np.ndarray]], gold: Mapping[str, np.ndarray],
                 samples: int = 1000, seed: int = 0, avg_over: Sequence[str] | None = None) -> PairedTable:
    """Point values and replicates of every system on every task of ``gold`` (pairs drawn once for all), and ``avg``
    over ``avg_over`` for the systems that have all of them."""
    if samples < 1:
        raise ValueError(f"paired bootstrap needs samples >= 1, got {samples}")
    tasks = list(gold)
    point: dict[str, dict[int, float]] = {}
    reps: dict[str, dict[int, np.ndarray]] = {}
    for task in tasks:
        have = [i for i, p in enumerate(predictions) if task in p]
        point[task] = {i: spearman(predictions[i][task], gold[task]) for i in have}
        drawn = task_replicates([predictions[i][task] for i in have], gold[task], samples, task_rng(seed, task)) \
            if have else []
        reps[task] = dict(zip(have, drawn, strict=True))
    over = list(avg_over) if avg_over is not None else (tasks if len(tasks) > 1 else [])
    if over:
        full = [i for i in range(len(predictions)) if all(i in point.get(t, {}) for t in over)]
        point[AVG] = {i: float(np.mean([point[t][i] for t in over])) for i in full}
        # a NaN in one task's resample makes that resample's average NaN, left out of the interval
        reps[AVG] = {i: np.mean([reps[t][i] for t in over], axis=0) for i in full}
    return PairedTable(tasks, point, reps)


def seeds_difference(a: Mapping[str, float], b: Mapping[str, float]) -> Difference | None:
    """Two seed groups' ``{seed: score}``: paired by seed when the seeds match, else mean difference +- sqrt(std_a^2
    + std_b^2); None under 2 seeds a side."""
    if len(a) < 2 or len(b) < 2:
        return None
    if set(a) == set(b):
        diffs = np.array([a[s] - b[s] for s in a], dtype=np.float64)
        mean, spread = float(diffs.mean()), float(diffs.std(ddof=1))
    else:
        xa, xb = np.array(list(a.values()), float), np.array(list(b.values()), float)
        mean, spread = float(xa.mean() - xb.mean()), float(np.hypot(xa.std(ddof=1), xb.std(ddof=1)))
    return Difference(mean, mean - spread, mean + spread)


DIFF_LEGEND = ("row minus {ref}, Spearman x100; [lo, hi]: paired bootstrap 95% interval (each resample draws the "
               "pairs once and scores both systems on them); seed groups: mean of the per-seed differences ± their "
               "std; ~: the interval contains 0, a difference these data do not resolve; -: no per-pair "
               "predictions (or seeds) on both sides")


def differences_table(reference: str, columns: list[str],
                      rows: list[tuple[str, Mapping[str, Difference | None]]]) -> str:
    """``| minus <reference> | <column>... |`` with one ``+1.23 [+0.40, +2.05]`` cell per row and column, a legend."""
    head = [f"minus {reference}", *columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, cells in rows:
        lines.append("| " + " | ".join([label, *((d.cell() if (d := cells.get(c)) else "-") for c in columns)])
                     + " |")
    return "\n".join([*lines, "", DIFF_LEGEND.format(ref=reference)]) + "\n"
