"""(premise, entailed hypothesis, contradicted hypothesis) triplets from labelled NLI pairs (``model.objective=mnrl``).

A contradiction of the SAME premise is the hard negative; neutral pairs are unused, and an entailment without a
contradiction is counted (``without_negative``), never given a made-up negative. Triplet tables (anchor / positive /
negative, or sent0 / sent1 / hard_neg) are used as they are.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from torch.utils.data import Dataset

from sts_lightning.datamodules.malformed_rows import MalformedRows
from sts_lightning.datamodules.nli_readers import LABELS, NAME_HINT, NLIPairs, load_source, read_nli_tables
from sts_lightning.datamodules.table_files import (
    COLUMNS,
    Table,
    check_roles,
    find_columns,
    is_file_source,
    read_tables,
    require_columns,
    text,
)
from sts_lightning.embeddings.errors import DataError

ROLES = ("nli", "triplets")  # data.columns of the NLI data group may name the roles of both


@dataclass
class NLITriplets:
    anchors: list[str]
    positives: list[str]
    negatives: list[str]
    without_negative: int = 0  # entailment pairs whose premise has no contradiction (not used)
    source: str = ""
    skipped: Counter = field(default_factory=Counter)  # malformed rows of a triplet file, per reason
    unlabeled: int = 0  # (a triplet file has no labels; kept so every NLI part reports alike)

    def __len__(self) -> int:
        return len(self.anchors)

    @classmethod
    def concat(cls, parts: Sequence[NLITriplets]) -> NLITriplets:
        """One training set from several (built and read) parts, in order."""
        return cls([a for p in parts for a in p.anchors], [s for p in parts for s in p.positives],
                   [s for p in parts for s in p.negatives], sum(p.without_negative for p in parts))


def build_triplets(parts: Sequence[NLIPairs]) -> NLITriplets:
    """One triplet per (premise, entailed hypothesis), its premise's contradictions used in turn (deterministic)."""
    entailed: dict[str, list[str]] = {}
    contradicted: dict[str, list[str]] = {}
    for part in parts:
        for premise, hypothesis, label in zip(part.premises, part.hypotheses, part.labels, strict=True):
            if label == LABELS["entailment"]:
                entailed.setdefault(premise, []).append(hypothesis)
            elif label == LABELS["contradiction"]:
                contradicted.setdefault(premise, []).append(hypothesis)
    out = NLITriplets([], [], [])
    for premise, positives in entailed.items():
        negatives = contradicted.get(premise)
        if not negatives:
            out.without_negative += len(positives)
            continue
        for i, positive in enumerate(positives):
            out.anchors.append(premise)
            out.positives.append(positive)
            out.negatives.append(negatives[i % len(negatives)])
    if not out.anchors:
        raise DataError("no NLI triplets: no premise has both an entailed and a contradicted hypothesis "
                        f"({out.without_negative} entailment pairs without a contradiction); use data.format=pairs")
    return out


def read_triplet_tables(tables: list[Table], source: str, columns: dict[str, str],
                        max_malformed_fraction: float = 0.01) -> NLITriplets:
    """Triplets as the files give them; a row with an empty text is skipped and counted (``malformed_rows``)."""
    out = NLITriplets([], [], [], source=source)
    bad = MalformedRows(out.skipped, max_malformed_fraction)
    for table in tables:
        names = require_columns(table, "triplets", columns)
        for i, row in enumerate(zip(*(table.columns[n] for n in names.values()), strict=True)):
            anchor, positive, negative = (text(cell).strip() for cell in row)
            if not (anchor and positive and negative):
                bad.skip(table.where(i), "empty sentence")
                continue
            out.anchors.append(anchor)
            out.positives.append(positive)
            out.negatives.append(negative)
        for line in table.bad_lines:
            bad.skip(f"{table.prefix}line {line}", "wrong number of fields")
    bad.check(source, len(out))
    if not out.anchors:
        raise DataError(f"{source}: no triplets found")
    return out


def load_triplet_source(spec: str, data_dir: str | os.PathLike | None = None, max_malformed_fraction: float = 0.01,
                        columns: dict[str, str] | None = None) -> NLIPairs | NLITriplets:
    """A triplet file as triplets; any other source as labelled pairs (a folder's first file decides)."""
    columns = check_roles(columns, ROLES)
    if not is_file_source(spec):
        return load_source(spec, data_dir, max_malformed_fraction, columns)
    path, tables = read_tables(spec, data_dir, hint=NAME_HINT)
    if any(role in COLUMNS["triplets"] for role in columns):
        triplets = True
    elif any(role in COLUMNS["nli"] for role in columns):
        triplets = False
    else:
        triplets = all(find_columns(tables[0], "triplets", {}).values())
    if triplets:
        return read_triplet_tables(tables, str(path), columns, max_malformed_fraction)
    return read_nli_tables(tables, str(path), columns, max_malformed_fraction)


class NLITripletDataset(Dataset):
    """Map-style triplets, so Lightning can shard it with a DistributedSampler like the pair dataset."""

    def __init__(self, triplets: NLITriplets):
        self.triplets = triplets

    def __len__(self) -> int:
        return len(self.triplets)

    def __getitem__(self, i: int) -> tuple[str, str, str]:
        t = self.triplets
        return t.anchors[i], t.positives[i], t.negatives[i]


def collate_triplets(rows: Sequence[tuple[str, str, str]]) -> dict[str, list[str]]:
    """Raw strings: the LightningModule tokenizes (the encoder owns its tokenizer)."""
    return {"anchors": [r[0] for r in rows], "positives": [r[1] for r in rows], "negatives": [r[2] for r in rows]}


__all__ = ["NLITripletDataset", "NLITriplets", "build_triplets", "collate_triplets", "load_triplet_source"]
