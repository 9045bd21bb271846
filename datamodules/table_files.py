"""A researcher's own training files: ``.tsv`` / ``.csv`` / ``.jsonl`` / ``.json`` / ``.parquet`` with named columns.

Which files, where a relative path is looked for and which column names are understood are shared by every kind of
training data. Read by ``datasets`` offline: ``.tsv`` never quoted, ``.csv`` quoted; a folder's files each on their
own, so messages name the file.
"""

from __future__ import annotations

import csv
import logging
import os
import re
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hydra.utils import to_absolute_path

from sts_lightning.embeddings.errors import ConfigError, DataError, unknown_choice
from sts_lightning.embeddings.io.input_file import require_file
from sts_lightning.sts.tasks import default_data_dir

log = logging.getLogger(__name__)

BUILDERS = {".tsv": "csv", ".csv": "csv", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}
TEXT = ".txt"  # sentences only: one sentence a line, read as it always was (datamodules.sentence_files)
# Sentences: any other file is one sentence a line too (1b_benchmark.dev.tokens, wiki.train.raw), except these
# containers, which would turn into lines of bytes.
NOT_TEXT = (".xlsx", ".xls", ".ods", ".zip", ".gz", ".bz2", ".xz", ".zst", ".tar", ".arrow", ".feather", ".orc",
            ".avro", ".pkl", ".pickle", ".npy", ".npz", ".h5", ".hdf5", ".pt", ".db", ".sqlite")

# Per kind: role -> the column names understood without ``data.columns`` (first match wins, any case).
COLUMNS: dict[str, dict[str, tuple[str, ...]]] = {
    "nli": {"premise": ("premise", "sentence1", "sentence_A"),
            "hypothesis": ("hypothesis", "sentence2", "sentence_B"),
            "label": ("label", "gold_label", "entailment_judgment")},
    "triplets": {"anchor": ("anchor", "sent0"), "positive": ("positive", "sent1"),
                 "negative": ("negative", "hard_neg")},
    "scored": {"sentence1": ("sentence1", "sentence_A", "text1"), "sentence2": ("sentence2", "sentence_B", "text2"),
               "score": ("score", "label", "similarity_score", "relatedness_score")},
    "sentences": {"text": ("text", "sentence")},
}
NAMED_SOURCE = re.compile(r"^[A-Za-z_][\w.-]*:")  # snli:dev, stsb:train, hub:..., sts:..., nli:...
BAD_LINE = re.compile(r"Skipping line (\d+)")  # pandas' on_bad_lines="warn" message


def is_file_source(spec: str) -> bool:
    """A path (``my/nli.tsv``, ``/data/shards``, ``nli.jsonl``), not a source name such as ``snli:dev``."""
    return not NAMED_SOURCE.match(str(spec))


def check_extension(spec: str, text_ok: bool = False) -> None:
    """A ``ConfigError`` for a file type no reader takes (before anything is read); ``text_ok``: sentences."""
    suffix = Path(str(spec)).suffix.lower()
    unsupported = suffix in NOT_TEXT if text_ok else suffix not in BUILDERS
    if unsupported and not Path(str(spec)).expanduser().is_dir():
        accepted = ", ".join([*([f"{TEXT} (one sentence a line)"] if text_ok else []), *BUILDERS])
        found = f"file type {suffix!r}" if suffix else "a file without an extension"
        raise ConfigError(f"{spec}: unsupported {found}; use {accepted} (or a folder of them)")


def resolve_path(spec: str, data_dir: str | os.PathLike | None, hint: str = "") -> Path:
    """Absolute as given; relative: under the data directory if it is there, else the command's working directory."""
    path = Path(str(spec)).expanduser()
    if path.is_absolute():
        return path
    value = data_dir or default_data_dir()
    candidates = ([Path(value).expanduser() / path] if value else []) + [Path(to_absolute_path(str(path)))]
    found = next((c for c in candidates if c.exists()), None)
    if found is None:
        raise DataError(f"{spec}: not found (looked for {' and '.join(map(str, candidates))}){hint}")
    return found


def data_files(path: Path, text_ok: bool = False) -> list[Path]:
    """The file itself, or the readable files of a folder (sorted); one-line errors for anything else."""
    accepted = (*BUILDERS, *([TEXT] if text_ok else []))
    if not path.is_dir():
        check_extension(str(path), text_ok)
        return [require_file(path)]
    found = sorted(p for p in path.iterdir() if p.suffix.lower() in accepted and not p.name.startswith("."))
    if not found:
        present = sorted(p.name for p in path.iterdir())[:8]
        raise DataError(f"{path}: a folder without {', '.join(accepted)} files (it holds: {present or 'nothing'})")
    return found


@dataclass
class Table:
    """One file's columns (values as the format stores them) and the lines pandas skipped as malformed."""

    path: Path
    columns: dict[str, list]
    rows: int
    bad_lines: list[int] = field(default_factory=list)
    prefix: str = ""  # "<file name> " when the source is a folder, so messages say which file

    def where(self, i: int) -> str:
        """Location of the 0-based data row ``i`` for messages."""
        return f"{self.prefix}row {i + 1}"


def _root_cause(err: BaseException) -> str:
    while err.__cause__ is not None or err.__context__ is not None:
        err = err.__cause__ or err.__context__
    return " ".join(str(err).split()) or type(err).__name__


def read_table(path: Path) -> Table:
    """One file through ``datasets`` (no cache left behind: read into memory from a temporary directory)."""
    import datasets  # heavy: only when a file source is read
    from datasets.utils.logging import disable_progress_bar, enable_progress_bar, is_progress_bar_enabled

    if path.stat().st_size == 0:
        raise DataError(f"{path}: empty file")
    suffix = path.suffix.lower()
    options = {".tsv": {"delimiter": "\t", "quoting": csv.QUOTE_NONE}, ".csv": {}}.get(suffix, None)
    if options is not None:  # every cell as written ("NA", "null" stay text); a bad line is skipped, reported
        options = {**options, "na_filter": False, "on_bad_lines": "warn"}
    bars = is_progress_bar_enabled()
    disable_progress_bar()
    try:
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ds = datasets.load_dataset(BUILDERS[suffix], data_files=[str(path)], split="train", cache_dir=tmp,
                                       keep_in_memory=True, **(options or {}))
            columns = ds.to_dict()
    except Exception as err:  # noqa: BLE001 -- pandas / pyarrow / datasets errors all mean "cannot read this file"
        if "corresponds to no data" in str(err):
            raise DataError(f"{path}: no data rows (only a header?)") from err
        raise DataError(f"{path}: cannot read it as {suffix[1:]}: {_root_cause(err)}") from err
    finally:
        if bars:
            enable_progress_bar()
    if "__index_level_0__" in columns:  # pandas took the first column as an index: row 1 has one field too many
        raise DataError(f"{path}: the first data row has more fields than the header names")
    bad = [int(m.group(1)) for w in caught for m in [BAD_LINE.search(str(w.message))] if m]
    return Table(path, columns, ds.num_rows, bad)


def read_tables(spec: str, data_dir: str | os.PathLike | None, hint: str = "") -> tuple[Path, list[Table]]:
    """The resolved path of a file source and each of its files read (one, or a folder's, which name their file)."""
    path = resolve_path(spec, data_dir, hint)
    tables = [read_table(f) for f in data_files(path)]
    if path.is_dir():
        for t in tables:
            t.prefix = f"{t.path.name} "
    return path, tables


def refuse_local_hub(spec: str, name: str) -> None:
    """``hub:`` means the Hugging Face hub only: a local path there (``load_dataset`` would take it, outside every
    check the file route makes) gets a ``ConfigError`` naming the path form."""
    if name.startswith(("/", ".", "~")) or Path(name).expanduser().exists():
        raise ConfigError(f"{spec}: 'hub:' reads the Hugging Face hub; for a local file or folder give its path "
                          f"instead, e.g. [{name}]")


def check_roles(columns: Mapping | None, kinds: Sequence[str]) -> dict[str, str]:
    """``data.columns`` as a plain dict, every key a role of ``kinds``: a ``ConfigError`` names the valid roles."""
    if columns is None:
        return {}
    if not isinstance(columns, Mapping):
        raise ConfigError(f"data.columns must map roles to column names, e.g. {{text: sentence}}; got {columns!r}")
    roles = [r for k in kinds for r in COLUMNS[k]]
    for key in columns:
        if key not in roles:
            raise unknown_choice("role in data.columns", key, roles)
    return {str(k): str(v) for k, v in columns.items()}


def find_columns(table: Table, kind: str, columns: Mapping[str, str]) -> dict[str, str | None]:
    """Role -> the file's column for ``kind`` (``None`` where nothing matches); configured names win."""
    by_lower = {c.lower(): c for c in table.columns}

    def match(name: str) -> str | None:
        return name if name in table.columns else by_lower.get(name.lower())

    found: dict[str, str | None] = {}
    for role, defaults in COLUMNS[kind].items():
        wanted = (columns[role],) if role in columns else defaults
        found[role] = next((m for m in map(match, wanted) if m is not None), None)
    return found


def require_columns(table: Table, kind: str, columns: Mapping[str, str], hint: str = "") -> dict[str, str]:
    """Like ``find_columns``, but a missing role is one ``DataError`` naming it and the columns the file has."""
    found = find_columns(table, kind, columns)
    for role, name in found.items():
        if name is None:
            asked = (f"column {columns[role]!r} (data.columns.{role})" if role in columns else
                     f"{role} column ({' / '.join(COLUMNS[kind][role])}; or set data.columns.{role})")
            raise DataError(f"{table.path}: no {asked}; the file has columns {list(table.columns)}{hint}")
    return found  # type: ignore[return-value]


def text(value) -> str:
    """A cell as text: ``None`` (a JSON null, an empty Parquet cell) is empty, numbers are written out."""
    return "" if value is None else str(value)
