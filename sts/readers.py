"""Readers for the original STS file formats: STS-B csv, SICK txt, SemEval STS 2012-2016 folders.

Every reader splits on tabs (the files hold unbalanced quotes) and stops at malformed input with
``DataError("<file>:<line>: ...")`` instead of silently dropping data.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.io.input_file import require_dir, require_file


@dataclass
class STSPairs:
    """Sentence pairs with gold similarity scores, from one file (or one SemEval subset)."""

    sentences1: list[str]
    sentences2: list[str]
    scores: np.ndarray
    source: str = ""

    def __len__(self) -> int:
        return len(self.scores)


# Gold similarity scales: STS-B and SemEval STS 2012-2016 score 0-5, SICK relatedness 1-5. A value outside
# them is a broken file (a 500 once turned Pearson 86.96 into 4.39 without a word).
STS_SCALE, SICK_SCALE = (0.0, 5.0), (1.0, 5.0)
# Control characters (C0 except tab, DEL, C1): kept inside text (STS 2012 MSRpar and STS-B train use \x12 as an
# apostrophe); a NUL, or a "sentence" of nothing else, is a binary or broken file.
CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


@dataclass
class PairBuilder:
    """Accumulates validated rows; keeps the error messages in one place."""

    path: Path
    scale: tuple[float, float] = STS_SCALE
    s1: list[str] = field(default_factory=list)
    s2: list[str] = field(default_factory=list)
    gold: list[float] = field(default_factory=list)

    def add(self, lineno: int, a: str, b: str, score: str, score_at: str | None = None) -> None:
        """One pair; ``score_at`` is ``file:line`` of the score when it lives in another file (SemEval gold)."""
        where = f"{self.path}:{lineno}"
        at = score_at or where
        try:
            value = float(score)
        except ValueError:
            raise DataError(f"{at}: score {score!r} is not a number") from None
        if not np.isfinite(value):
            raise DataError(f"{at}: score {score!r} is not finite")
        low, high = self.scale
        if not low <= value <= high:
            raise DataError(f"{at}: score {score!r} is outside this dataset's {low:g}-{high:g} scale")
        for column, text in (("sentence 1", a), ("sentence 2", b)):
            if not text.strip():
                raise DataError(f"{where}: {column} is empty")
            if "\x00" in text or not CONTROL.sub("", text).strip():
                raise DataError(f"{where}: {column} is {'a NUL byte' if chr(0) in text else 'control characters only'} "
                                "(a binary or broken file?)")
        self.s1.append(a.strip())
        self.s2.append(b.strip())
        self.gold.append(value)

    def build(self) -> STSPairs:
        if not self.gold:
            raise DataError(f"{self.path}: no scored sentence pairs found")
        return STSPairs(self.s1, self.s2, np.asarray(self.gold, dtype=np.float64), str(self.path))


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its line end); CRLF files read like LF files."""
    require_file(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        line = path.read_bytes()[: err.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not valid UTF-8 ({err.reason})") from None
    for i, line in enumerate(text.splitlines(), start=1):
        yield i, line


def _columns(path: Path, lineno: int, line: str, minimum: int, what: str) -> list[str]:
    cols = line.split("\t")
    if len(cols) < minimum:
        raise DataError(f"{path}:{lineno}: expected at least {minimum} tab-separated columns ({what}), "
                        f"found {len(cols)}")
    return cols


def read_stsb(path: str | Path) -> STSPairs:
    """STS Benchmark ``sts-{train,dev,test}.csv``: genre, file, year, id, score, s1, s2 [, licence cols]."""
    path = Path(path)
    out = PairBuilder(path)
    for lineno, line in _lines(path):
        if not line.strip():
            continue
        cols = _columns(path, lineno, line, 7, "genre, file, year, id, score, sentence1, sentence2")
        out.add(lineno, cols[5], cols[6], cols[4])
    return out.build()


def read_sick(path: str | Path) -> STSPairs:
    """SICK ``SICK_*.txt``: header, then pair_ID, sentence_A, sentence_B, relatedness_score, ..."""
    path = Path(path)
    out = PairBuilder(path, scale=SICK_SCALE)
    header: list[str] | None = None
    for lineno, line in _lines(path):
        if not line.strip():
            continue
        cols = line.split("\t")
        if header is None:
            header = cols
            needed = {"sentence_A", "sentence_B", "relatedness_score"}
            if not needed <= set(header):
                raise DataError(f"{path}:{lineno}: SICK header must name {sorted(needed)}, found {header}")
            ia, ib, isc = (header.index(k) for k in ("sentence_A", "sentence_B", "relatedness_score"))
            continue
        if len(cols) != len(header):
            raise DataError(f"{path}:{lineno}: expected {len(header)} tab-separated columns, found {len(cols)}")
        out.add(lineno, cols[ia], cols[ib], cols[isc])
    return out.build()


def read_semeval_subset(input_path: str | Path, gold_path: str | Path) -> STSPairs:
    """One SemEval subset: ``*.input.<set>.txt`` + ``*.gs.<set>.txt``; an unscored (blank gold) pair is skipped."""
    input_path, gold_path = Path(input_path), Path(gold_path)
    inputs = list(_lines(input_path))
    golds = list(_lines(gold_path))
    # A trailing empty line at the end of a file is not a row.
    while inputs and not inputs[-1][1].strip():
        inputs.pop()
    while golds and not golds[-1][1].strip() and len(golds) > len(inputs):
        golds.pop()
    if len(inputs) != len(golds):
        raise DataError(f"{gold_path}: has {len(golds)} lines but {input_path} has {len(inputs)} pairs")
    out = PairBuilder(input_path)
    for (lineno, line), (gold_lineno, gold) in zip(inputs, golds, strict=True):
        if not gold.strip():
            continue
        cols = _columns(input_path, lineno, line, 2, "sentence1, sentence2")
        out.add(lineno, cols[0], cols[1], gold.strip().split("\t")[0], score_at=f"{gold_path}:{gold_lineno}")
    return out.build()


_INPUT_RE = re.compile(r"^(?P<prefix>.*)\.input\.(?P<subset>.+)\.txt$")


def read_semeval_dir(folder: str | Path) -> dict[str, STSPairs]:
    """All subsets of a SemEval STS year folder, keyed by subset name, sorted (both file namings; other files ignored)."""
    folder = require_dir(folder)
    subsets: dict[str, STSPairs] = {}
    for inp in sorted(folder.iterdir()):
        m = _INPUT_RE.match(inp.name)
        if not m:
            continue
        gold = folder / f"{m['prefix']}.gs.{m['subset']}.txt"
        if not gold.is_file():
            raise DataError(f"{inp}: no gold file {gold.name} beside it")
        subsets[m["subset"]] = read_semeval_subset(inp, gold)
    if not subsets:
        raise DataError(f"{folder}: no '<prefix>.input.<set>.txt' files found")
    return subsets
