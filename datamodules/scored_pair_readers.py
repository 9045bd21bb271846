"""Readers of scored sentence pairs (STS-B, SICK relatedness) as TRAINING data, scores normalised to [0, 1].

Sources are ``"<corpus>:<split>"`` in the data directory, the same files ``sts.tasks`` reads::

    stsb:train -> stsb/sts-train.csv      (score 0-5; also stsb:dev, stsb:test)
    sick:train -> sick/SICK_train.txt     (relatedness 1-5; also sick:trial, sick:test)
    nli:snli:train -> an NLI source read as AnglE reads NLI: entailment 1, contradiction 0, neutral dropped
    my/sts.csv -> your own table or folder: sentence1 / sentence2 / score on ``data.score_scale`` (default [0, 1])

Scores become ``(score - low) / (high - low)`` over the source's own scale (a SICK 1 is 0). Malformed rows are
skipped and counted as the NLI readers do, up to ``max_malformed_fraction``.
"""

from __future__ import annotations

import logging
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sts_lightning.datamodules.malformed_rows import MalformedRows
from sts_lightning.datamodules.nli_readers import (
    LABELS,
    SENTEVAL_DIRS,
    first_file,
    load_source,
    read_tab_rows,
)
from sts_lightning.datamodules.table_files import (
    Table,
    check_extension,
    check_roles,
    is_file_source,
    read_tables,
    require_columns,
    text,
)
from sts_lightning.embeddings.errors import ConfigError, DataError, unknown_choice
from sts_lightning.sts.readers import CONTROL, SICK_SCALE, STS_SCALE
from sts_lightning.sts.tasks import resolve_data_dir, sick_files

log = logging.getLogger(__name__)

SPLITS = {"stsb": ("train", "dev", "test"), "sick": ("train", "trial", "test")}
UNIT_SCALE = (0.0, 1.0)  # your own files' scale when data.score_scale is not set
NLI_PREFIX = "nli:"  # nli:<NLI source>: labelled NLI pairs as scored pairs (load_nli_as_scored)
NLI_SCORES = {LABELS["entailment"]: 1.0, LABELS["contradiction"]: 0.0}  # neutral: dropped (AnglE's NLI recipe)


@dataclass
class ScoredPairs:
    """Validated pairs of one source with scores in [0, 1], plus what was skipped and why."""

    sentences1: list[str] = field(default_factory=list)
    sentences2: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    source: str = ""
    skipped: Counter = field(default_factory=Counter)

    def __len__(self) -> int:
        return len(self.scores)


def parse_source(spec: str) -> tuple[str, str]:
    """``(corpus, split)`` of a source name; a ``ConfigError`` naming the valid ones otherwise (no file read)."""
    corpus, _, split = str(spec).partition(":")
    if corpus not in SPLITS:
        names = [f"{c}:{s}" for c, splits in SPLITS.items() for s in splits]
        raise unknown_choice("scored-pair source", spec, [*names, "<a file path: my/sts.csv>"])
    if split not in SPLITS[corpus]:
        raise unknown_choice(f"{corpus} split in source", spec, [f"{corpus}:{s}" for s in SPLITS[corpus]])
    return corpus, split


class _Rows:
    """Accumulates rows of one source; owns the checks, the normalisation and the skip/threshold policy."""

    def __init__(self, path: Path | str, scale: tuple[float, float], max_malformed_fraction: float):
        self.out = ScoredPairs(source=str(path))
        self.low, self.high = scale
        self.bad = MalformedRows(self.out.skipped, max_malformed_fraction)
        self.skip = self.bad.skip

    def add(self, lineno: int | str, a: str, b: str, score: str | float) -> None:
        value = as_number(score)
        if not math.isfinite(value):
            return self.skip(lineno, "score is not a finite number")
        if not self.low <= value <= self.high:
            return self.skip(lineno, f"score outside the {self.low:g}-{self.high:g} scale")
        a, b = a.strip(), b.strip()
        if not a or not b:
            return self.skip(lineno, "empty sentence")
        if any("\x00" in s or not CONTROL.sub("", s).strip() for s in (a, b)):
            return self.skip(lineno, "NUL or control characters only")
        self.out.sentences1.append(a)
        self.out.sentences2.append(b)
        self.out.scores.append((value - self.low) / (self.high - self.low))

    def finish(self) -> ScoredPairs:
        out = self.out
        self.bad.check(out.source, len(out))
        if not out.scores:
            raise DataError(f"{out.source}: no scored sentence pairs found")
        return out


def as_number(score: str | float | None) -> float:
    """The score as a float; NaN for anything that is no number (an empty cell, text)."""
    try:
        return float(score)
    except (TypeError, ValueError):
        return math.nan


def check_scale(table: Table, column: str, scale: tuple[float, float] | None, max_malformed_fraction: float) -> None:
    """Without ``data.score_scale`` a file must hold [0, 1] scores: else one line naming its range and the fix."""
    if scale is not None:
        return
    values = [v for v in map(as_number, table.columns[column]) if math.isfinite(v)]
    outside = sum(not 0.0 <= v <= 1.0 for v in values)
    if outside > max_malformed_fraction * max(len(values), 1):
        raise DataError(f"{table.path}: column {column!r} holds scores from {min(values):g} to {max(values):g}, "
                        "not in [0, 1]: give their scale, e.g. data.score_scale=[0,5] (STS-B) or [1,5] (SICK)")


def read_scored_tables(tables: list[Table], source: str, columns: dict[str, str], scale: tuple[float, float] | None,
                       max_malformed_fraction: float = 0.01) -> ScoredPairs:
    """Scored pairs from your own files (``datamodules.table_files``), normalised from ``scale`` to [0, 1]."""
    rows = _Rows(source, scale or UNIT_SCALE, max_malformed_fraction)
    for table in tables:
        names = require_columns(table, "scored", columns)
        check_scale(table, names["score"], scale, max_malformed_fraction)
        for i, (a, b, score) in enumerate(zip(*(table.columns[n] for n in names.values()), strict=True)):
            rows.add(table.where(i), text(a), text(b), score)
        for line in table.bad_lines:
            rows.skip(f"{table.prefix}line {line}", "wrong number of fields")
    return rows.finish()


def read_stsb_pairs(path: str | Path, max_malformed_fraction: float = 0.01) -> ScoredPairs:
    """STS Benchmark ``sts-*.csv``: genre, file, year, id, score (0-5), sentence1, sentence2 [, licence cols]."""
    path = Path(path)
    return read_tab_rows(path, _Rows(path, STS_SCALE, max_malformed_fraction), None, (5, 6, 4), minimum=7)


def read_sick_pairs(path: str | Path, max_malformed_fraction: float = 0.01) -> ScoredPairs:
    """SICK ``SICK_*.txt``: a header naming sentence_A, sentence_B, relatedness_score (1-5); tab-separated."""
    path = Path(path)
    return read_tab_rows(path, _Rows(path, SICK_SCALE, max_malformed_fraction),
                         ("sentence_A", "sentence_B", "relatedness_score"))


def load_scored_source(spec: str, data_dir: str | os.PathLike | None = None, max_malformed_fraction: float = 0.01,
                       columns: dict[str, str] | None = None,
                       score_scale: tuple[float, float] | None = None) -> ScoredPairs:
    """One source, e.g. ``"stsb:train"`` or ``"my/sts.csv"``; scores in [0, 1] (``columns``, ``score_scale``: files only)."""
    if str(spec).startswith(NLI_PREFIX):
        return load_nli_as_scored(spec, data_dir, max_malformed_fraction, columns)
    if is_file_source(spec):
        path, tables = read_tables(spec, data_dir, hint="; or name a source such as stsb:train, sick:train")
        return read_scored_tables(tables, str(path), check_roles(columns, ("scored",)), score_scale,
                                  max_malformed_fraction)
    corpus, split = parse_source(spec)
    root = resolve_data_dir(data_dir)
    if corpus == "stsb":
        return read_stsb_pairs(first_file(f"scored-pair source {spec!r}", [root / "stsb" / f"sts-{split}.csv"]),
                               max_malformed_fraction)
    return read_sick_pairs(first_file(f"scored-pair source {spec!r}", sick_files(root, split)), max_malformed_fraction)


def load_nli_as_scored(spec: str, data_dir: str | os.PathLike | None = None, max_malformed_fraction: float = 0.01,
                       columns: dict[str, str] | None = None) -> ScoredPairs:
    """``nli:<source>``: NLI pairs as AnglE's NLI recipe reads them, entailment 1.0, contradiction 0.0, neutral dropped."""
    pairs = load_source(spec[len(NLI_PREFIX):], data_dir, max_malformed_fraction, columns)
    out = ScoredPairs(source=pairs.source, skipped=pairs.skipped)
    for a, b, label in zip(pairs.premises, pairs.hypotheses, pairs.labels, strict=True):
        if label in NLI_SCORES:
            out.sentences1.append(a)
            out.sentences2.append(b)
            out.scores.append(NLI_SCORES[label])
    if not out.scores:
        raise DataError(f"{spec}: no entailment or contradiction pairs found")
    return out


def check_nli_name(spec: str) -> None:
    """An ``nli:`` source names an NLI corpus or a file the NLI readers take (no file read)."""
    inner = spec[len(NLI_PREFIX):]
    if is_file_source(inner):
        return check_extension(inner)
    if inner.split(":")[0] not in (*SENTEVAL_DIRS, "sick", "hub"):
        raise unknown_choice("NLI source in", spec, ["nli:snli:train", "nli:multinli:train", "nli:sick:train",
                                                     "nli:hub:snli:train", "nli:my/nli.tsv"])


def check_sources(sources: list[str]) -> None:
    """Every source name (and file type) valid and the list non-empty: one ``ConfigError`` line before any read."""
    if not sources:
        raise ConfigError("data.sources is empty: name at least one scored-pair source, e.g. [stsb:train]")
    for spec in sources:
        if str(spec).startswith(NLI_PREFIX):
            check_nli_name(spec)
            continue
        if is_file_source(spec):
            check_extension(spec)
        else:
            parse_source(spec)


def check_score_scale(score_scale) -> tuple[float, float] | None:
    """``data.score_scale`` as ``(low, high)`` with low < high, or ``None``; a ``ConfigError`` line otherwise."""
    if score_scale is None:
        return None
    try:
        low, high = (float(v) for v in score_scale)
    except (TypeError, ValueError):
        low = high = math.nan
    if not low < high:
        raise ConfigError(f"data.score_scale must be [low, high] with low < high, e.g. [0,5]; got {score_scale!r}")
    return low, high
