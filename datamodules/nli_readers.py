"""Readers of labelled NLI sentence pairs (SNLI, MultiNLI, SICK) for SBERT-style training.

Sources are ``"<corpus>:<split>"`` in the data directory::

    snli:dev       -> nli/snli/{s1,s2,labels}.dev            (SentEval layout; also SNLI/, nli/SNLI/)
    multinli:train -> nli/multinli/{s1,s2,labels}.train      (also MultiNLI/; splits like dev.matched)
    sick:train     -> sick/SICK_train.txt                    (entailment_judgment column)
    hub:snli:train -> stanfordnlp/snli from the hub (or any dataset with premise / hypothesis / label)
    my/nli.tsv     -> your own table or folder (``datamodules.table_files``), premise / hypothesis / label

Labels are 0=entailment, 1=neutral, 2=contradiction, as names or numbers. Pairs without a gold label and malformed
rows are skipped and counted; more than ``max_malformed_fraction`` malformed stops the run.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sts_lightning.datamodules.malformed_rows import MalformedRows
from sts_lightning.datamodules.table_files import (
    Table,
    check_roles,
    find_columns,
    is_file_source,
    read_tables,
    refuse_local_hub,
    require_columns,
    text,
)
from sts_lightning.embeddings.errors import ConfigError, DataError, unknown_choice
from sts_lightning.embeddings.io.input_file import require_file
from sts_lightning.sts.tasks import resolve_data_dir, sick_files

log = logging.getLogger(__name__)

LABELS = {"entailment": 0, "neutral": 1, "contradiction": 2}
LABEL_HINT = "NLI labels must be entailment, neutral, contradiction or 0, 1, 2 (SNLI's coding; -1 or - = no gold label)"
HUB_DATASETS = {"snli": "stanfordnlp/snli", "multi_nli": "nyu-mll/multi_nli"}
SENTEVAL_DIRS = {"snli": ("snli", "SNLI"), "multinli": ("multinli", "MultiNLI")}
NAME_HINT = "; or name a source such as snli:dev, sick:train, hub:snli:train"


@dataclass
class NLIPairs:
    """Validated pairs of one source, plus what was skipped and why (for logs and tests)."""

    premises: list[str] = field(default_factory=list)
    hypotheses: list[str] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    source: str = ""
    skipped: Counter = field(default_factory=Counter)
    unlabeled: int = 0

    def __len__(self) -> int:
        return len(self.labels)


class _Rows:
    """Accumulates rows of one source; owns the skip/threshold policy so every reader applies it alike."""

    def __init__(self, source: str, max_malformed_fraction: float):
        self.out = NLIPairs(source=source)
        self.bad = MalformedRows(self.out.skipped, max_malformed_fraction)
        self.skip = self.bad.skip

    def add(self, lineno: int | str, premise: str | None, hypothesis: str | None,
            label: str | int | float | None) -> None:
        label = label.strip() if isinstance(label, str) else label
        if label in (-1, "-", "-1"):
            self.out.unlabeled += 1
            return
        if premise is None or hypothesis is None or label is None:
            return self.skip(lineno, "not UTF-8")
        if label == "":
            return self.skip(lineno, "missing label")
        value = label_id(label)
        if value is None:
            return self.skip(lineno, f"unknown label {label!r}" if len(self.bad.where) < 20 else "unknown label")
        premise, hypothesis = premise.strip(), hypothesis.strip()
        if not premise or not hypothesis:
            return self.skip(lineno, "empty sentence")
        self.out.premises.append(premise)
        self.out.hypotheses.append(hypothesis)
        self.out.labels.append(int(value))

    def finish(self) -> NLIPairs:
        out = self.out
        unknown = any(reason.startswith("unknown label") for reason in out.skipped)
        self.bad.check(out.source, len(out), hint=LABEL_HINT if unknown else "")
        if out.unlabeled:
            log.info("%s: skipped %d pairs without a gold label", out.source, out.unlabeled)
        if not out.labels:
            raise DataError(f"{out.source}: no labelled sentence pairs found")
        return out


def label_id(label: str | int | float) -> int | None:
    """0, 1 or 2 for a label name (any case) or number (``2``, ``"2"``, ``2.0``); ``None`` for anything else."""
    if isinstance(label, str):
        value = int(label) if label.isdigit() else LABELS.get(label.lower())
    else:
        value = int(label) if isinstance(label, int | float) and float(label).is_integer() else None
    return value if value in (0, 1, 2) else None


def read_nli_tables(tables: list[Table], source: str, columns: dict[str, str],
                    max_malformed_fraction: float = 0.01) -> NLIPairs:
    """Labelled pairs from your own files (``datamodules.table_files``); a triplet file is told to use triplets."""
    rows = _Rows(source, max_malformed_fraction)
    for table in tables:
        triplets = all(find_columns(table, "triplets", columns).values())
        hint = "; it holds triplets: use data.format=triplets" if triplets else ""
        names = require_columns(table, "nli", columns, hint)
        cells = zip(*(table.columns[n] for n in names.values()), strict=True)
        for i, (premise, hypothesis, label) in enumerate(cells):
            rows.add(table.where(i), text(premise), text(hypothesis), "" if label is None else label)
        for line in table.bad_lines:
            rows.skip(f"{table.prefix}line {line}", "wrong number of fields")
    return rows.finish()


def _read_lines(path: Path) -> list[str | None]:
    """Lines without line ends (LF or CRLF), ``None`` for one that is not UTF-8; split on ``\\n`` only, as
    ``str.splitlines`` also breaks on U+2028, which would shift parallel files."""
    require_file(path)
    raw = path.read_bytes().split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    lines: list[str | None] = []
    for chunk in raw:
        try:
            lines.append(chunk.rstrip(b"\r").decode("utf-8").lstrip("\ufeff"))
        except UnicodeDecodeError:
            lines.append(None)
    return lines


def read_senteval(folder: str | Path, split: str, max_malformed_fraction: float = 0.01) -> NLIPairs:
    """SentEval / InferSent layout: ``s1.<split>``, ``s2.<split>``, ``labels.<split>``, one row a line."""
    folder = Path(folder)
    paths = [folder / f"{kind}.{split}" for kind in ("s1", "s2", "labels")]
    columns = [_read_lines(p) for p in paths]
    if len({len(c) for c in columns}) != 1:
        counts = ", ".join(f"{p} has {len(c)}" for p, c in zip(paths, columns, strict=True))
        raise DataError(f"parallel NLI files must have the same number of lines: {counts}")
    rows = _Rows(f"{folder}/{{s1,s2,labels}}.{split}", max_malformed_fraction)
    for lineno, (a, b, label) in enumerate(zip(*columns, strict=True), start=1):
        rows.add(lineno, a, b, label)
    return rows.finish()


def read_sick_nli(path: str | Path, max_malformed_fraction: float = 0.01) -> NLIPairs:
    """SICK ``SICK_*.txt``: a header naming sentence_A, sentence_B, entailment_judgment; tab-separated."""
    return read_tab_rows(Path(path), _Rows(str(path), max_malformed_fraction),
                         ("sentence_A", "sentence_B", "entailment_judgment"), blank=None, header="SICK header")


def read_tab_rows(path: Path, rows, header_names: tuple[str, ...] | None, columns: tuple[int, int, int] | None = None,
                  minimum: int = 0, blank: str | None = "blank line", header: str = "header"):
    """Every line of ``path`` fed to ``rows``: tab-separated, never quoted-CSV (the files hold stray quotes). Columns
    are ``header_names`` of the first non-blank line, else indices ``columns`` in rows of at least ``minimum``."""
    expected = None
    for lineno, line in enumerate(_read_lines(path), start=1):
        if line is None:
            rows.skip(lineno, "not UTF-8")
            continue
        if not line.strip():
            if blank is not None:
                rows.skip(lineno, blank)
            continue
        cols = line.split("\t")
        if header_names is not None and expected is None:
            if not set(header_names) <= set(cols):
                raise DataError(f"{path}:{lineno}: {header} must name {list(header_names)}, found {cols}")
            columns, expected = tuple(cols.index(k) for k in header_names), len(cols)
            continue
        if (expected is not None and len(cols) != expected) or len(cols) < minimum:
            rows.skip(lineno, f"wrong column count (expected {expected or f'at least {minimum}'})")
            continue
        a, b, value = (cols[i] for i in columns)
        rows.add(lineno, a, b, value)
    return rows.finish()


def first_file(what: str, candidates: list[Path]) -> Path:
    """The first of ``candidates`` that exists; a ``DataError`` naming them all otherwise."""
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        raise DataError(f"{what}: none of {[str(c) for c in candidates]} exists")
    return found


def _load_hub(name: str, split: str):
    """Download (or reuse the local datasets cache of) one hub split."""
    refuse_local_hub(f"hub:{name}:{split}", name)
    dataset_id = HUB_DATASETS.get(name, name)
    try:
        from datasets import load_dataset

        return dataset_id, load_dataset(dataset_id, split=split)
    except Exception as err:  # network, unknown split, auth: all mean the same to the user
        raise DataError(f"could not load {dataset_id} ({split}) from the Hugging Face hub: {err}. "
                        "Offline? Use local files instead (snli:<split>, sick:<split>).") from err


def read_hub_nli(name: str, split: str, max_malformed_fraction: float = 0.01) -> NLIPairs:
    """``snli`` / ``multi_nli`` (or a dataset id) from the hub; "line" numbers in warnings are row numbers."""
    dataset_id, ds = _load_hub(name, split)
    missing = {"premise", "hypothesis", "label"} - set(ds.column_names)
    if missing:
        raise DataError(f"hub dataset {dataset_id} lacks columns {sorted(missing)}")
    rows = _Rows(f"hub:{dataset_id}/{split}", max_malformed_fraction)
    for i, (a, b, label) in enumerate(zip(ds["premise"], ds["hypothesis"], ds["label"], strict=True), 1):
        rows.add(i, a or "", b or "", label)
    return rows.finish()


def load_source(spec: str, data_dir: str | os.PathLike | None = None,
                max_malformed_fraction: float = 0.01, columns: dict[str, str] | None = None) -> NLIPairs:
    """One source, e.g. ``"snli:dev"``, ``"hub:snli:train"`` or ``"my/nli.jsonl"`` (``columns``: files only)."""
    if is_file_source(spec):
        path, tables = read_tables(spec, data_dir, hint=NAME_HINT)
        return read_nli_tables(tables, str(path), check_roles(columns, ("nli", "triplets")), max_malformed_fraction)
    parts = spec.split(":")
    if parts[0] == "hub" and len(parts) == 3:
        return read_hub_nli(parts[1], parts[2], max_malformed_fraction)
    if len(parts) != 2 or not parts[1]:
        raise ConfigError(f"NLI source {spec!r} must look like 'snli:dev', 'sick:train', 'hub:snli:train' "
                          "or be a file path such as my/nli.tsv")
    corpus, split = parts
    root = resolve_data_dir(data_dir)
    if corpus == "sick":
        return read_sick_nli(first_file(f"NLI source {spec!r}", sick_files(root, split)), max_malformed_fraction)
    if corpus not in SENTEVAL_DIRS:
        raise unknown_choice("NLI corpus", corpus, [*SENTEVAL_DIRS, "sick", "hub"])
    folders = [base / n for base in (root / "nli", root) for n in SENTEVAL_DIRS[corpus]]
    found = next((f for f in folders if (f / f"s1.{split}").is_file()), None)
    if found is None:
        raise DataError(f"NLI source {spec!r}: no s1.{split} in any of {[str(f) for f in folders]}")
    return read_senteval(found, split, max_malformed_fraction)
