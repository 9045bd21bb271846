"""Sentence files, one sentence a line: scanned once into a cached index of byte spans, read by offset.

``load_spans`` scans each file once (``datamodules.line_scan``, cached by ``datamodules.span_cache``) and
``SentenceIndex`` reads any line with ``os.pread``, so millions of lines stay on disk. Empty and non-UTF-8 lines are
skipped and counted. Tables, ``hub:`` and ``sts:`` sources are written once into a text file in the cache directory.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from sts_lightning.datamodules.sentence_tables import sentence_file_paths
from sts_lightning.datamodules.span_cache import load_spans
from sts_lightning.datamodules.table_files import refuse_local_hub
from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.embeddings.io.atomic import atomic_file, atomic_write
from sts_lightning.embeddings.io.cache_root import cache_dir_or_root
from sts_lightning.sts.tasks import load_task

log = logging.getLogger(__name__)


def hub_parts(spec: str) -> tuple[str, str | None, str]:
    """``hub:<dataset>[:<config>]:<split>`` as (dataset, config or None, split)."""
    parts = spec.split(":")[1:]
    if len(parts) not in (2, 3):
        raise ConfigError(f"hub source {spec!r} must look like 'hub:<dataset>[:<config>]:<split>'")
    return parts[0], (parts[1] if len(parts) == 3 else None), parts[-1]


def materialize_hub(spec: str, cache_dir: Path, max_rows: int | None = None) -> Path:
    """Stream ``hub:<dataset>[:<config>]:<split>`` once into ``cache_dir/hub/...txt``, one row a line."""
    name, config, split = hub_parts(spec)
    refuse_local_hub(spec, name)
    stem = "_".join(p for p in (name, config, split) if p is not None).replace("/", "__")
    out = Path(cache_dir) / "hub" / f"{stem}.{max_rows or 'all'}.txt"
    if out.is_file():
        return out
    try:
        from datasets import load_dataset

        rows = load_dataset(name, config, split=split, streaming=True)
        written, blank = 0, 0
        with atomic_file(out) as tmp, tmp.open("w", encoding="utf-8") as fh:
            for row in rows:
                text = " ".join(str(row["text"] or "").split())  # rows may hold newlines: one row, one line
                blank += not text
                if text:
                    fh.write(text + "\n")
                    written += 1
                    if max_rows and written >= max_rows:
                        break
    except Exception as err:  # network, auth, missing column: all mean the same to the user
        raise DataError(f"could not stream {spec} from the Hugging Face hub: {err!r}. "
                        "Offline? Use local files instead.") from err
    log.info("%s: wrote %d rows to %s, skipped %d empty rows", spec, written, out, blank)
    return out


class SentenceIndex:
    """Usable lines of several files as byte spans per file (a cached ``.npy`` or an array), read with ``os.pread``:
    a memory map's random faults would pull neighbourhoods of a large index into each process's RSS.
    """

    MAX_OPEN = 64

    def __init__(self, files: Sequence[Path], parts: Sequence[np.ndarray | tuple[Path, int]], bounds: np.ndarray,
                 skipped: dict[str, int], size: int | None = None):
        self.files, self.parts, self.skipped = list(map(Path, files)), list(parts), skipped
        self.bounds = np.asarray(bounds, dtype=np.int64)
        self.size = int(self.bounds[-1]) if size is None else min(int(size), int(self.bounds[-1]))

    def __len__(self) -> int:
        return self.size

    def _fd(self, key: tuple[str, int], path: Path) -> int:
        """An open descriptor of ``path`` from this process's cache (at most ``MAX_OPEN``, LRU)."""
        fds: OrderedDict[tuple[str, int], int] = self.__dict__.setdefault("_fds", OrderedDict())  # per process
        if key in fds:
            fds.move_to_end(key)
            return fds[key]
        if len(fds) >= self.MAX_OPEN:
            os.close(fds.popitem(last=False)[1])
        fds[key] = os.open(path, os.O_RDONLY)
        return fds[key]

    def _span(self, f: int, row: int) -> tuple[int, int]:
        part = self.parts[f]
        if isinstance(part, np.ndarray):
            return int(part[row, 0]), int(part[row, 1])
        path, offset = part
        start, end = np.frombuffer(os.pread(self._fd(("index", f), path), 16, offset + 16 * row), "<i8").tolist()
        return start, end

    def sentence(self, i: int) -> str:
        if not 0 <= i < self.size:
            raise IndexError(f"sentence {i} of {self.size}")
        f = int(np.searchsorted(self.bounds, i, side="right")) - 1
        start, end = self._span(f, i - int(self.bounds[f]))
        return os.pread(self._fd(("text", f), self.files[f]), end - start, start).decode("utf-8").strip()

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_fds"}  # descriptors don't cross processes

    def split_tail(self, n: int) -> tuple[SentenceIndex, list[str]]:
        """(the index without its last ``n`` sentences, those sentences): a held-out set, the same everywhere."""
        if not 0 < n < len(self):
            raise DataError(f"cannot hold out {n} of {len(self)} usable sentences (need 0 < n < {len(self)})")
        head = SentenceIndex(self.files, self.parts, self.bounds, self.skipped, len(self) - n)
        return head, [self.sentence(i) for i in range(len(self) - n, len(self))]

    @classmethod
    def build(cls, files: Sequence[Path], cache_dir: Path | None, min_words: int = 1,
              max_words: int | None = None, max_sentences: int | None = None) -> SentenceIndex:
        """Index the files (in the given order, then the first ``max_sentences``), logging what was skipped."""
        parts, counts, skipped = [], [0], Counter()
        for path in files:
            s, stats = load_spans(Path(path), cache_dir, min_words, max_words)
            parts.append((Path(s.filename), s.offset) if isinstance(s, np.memmap) else s)  # read with pread
            counts.append(len(s))
            skipped.update(stats["skipped"])
            if stats["report"]:
                log.warning("%s: skipped %d lines: %s", path, sum(stats["skipped"].values()), stats["report"])
        index = cls(files, parts, np.cumsum(counts), dict(skipped), max_sentences)
        if not len(index):
            raise DataError(f"no usable sentences in {[str(f) for f in files]}")
        return index


def materialize_sts(spec: str, data_dir: str | None, cache_dir: Path) -> Path:
    """``sts:<task>[+<task>...]``: the tasks' distinct sentences, one a line, in a file named by their hash."""

    name = spec.split(":", 1)[1]
    if not name:
        raise ConfigError(f"STS source {spec!r} must look like 'sts:stsb-dev' or 'sts:sts12+sts16'")
    task = load_task(name, data_dir)
    sentences = list(dict.fromkeys(s.strip() for p in task.subsets.values()
                                   for s in (*p.sentences1, *p.sentences2) if s.strip()))
    text = "".join(f"{s}\n" for s in sentences)
    digest = hashlib.sha1(text.encode()).hexdigest()[:16]
    out = Path(cache_dir) / "sts" / f"{name.replace('/', '_')}.{digest}.txt"
    if not out.is_file():
        atomic_write(out, text.encode("utf-8"))
        log.info("%s: wrote %d distinct sentences to %s", spec, len(sentences), out)
    return out


def source_paths(files: Sequence[str], data_dir: str | None, cache_dir: Path, max_sentences: int | None,
                 columns: Mapping[str, str] | None = None, max_malformed_fraction: float = 0.01) -> list[Path]:
    """One-sentence-a-line files of the sources, in order; tables, ``hub:`` and ``sts:`` written once."""

    def paths(f: str) -> list[Path]:
        if f.startswith("hub:"):
            return [materialize_hub(f, cache_dir, max_sentences)]
        if f.startswith("sts:"):
            return [materialize_sts(f, data_dir, cache_dir)]
        return sentence_file_paths(f, data_dir, cache_dir, columns, max_malformed_fraction)

    return [p for f in files for p in paths(f)]


def read_sentences(files: Sequence[str], data_dir: str | None, min_words: int = 1, max_words: int | None = None,
                   max_sentences: int | None = None, cache_dir: str | os.PathLike | None = None) -> list[str]:
    """The usable lines of sentence files, de-duplicated in order (a fitting corpus weighs every sentence once)."""
    cache = cache_dir_or_root(cache_dir)
    index = SentenceIndex.build(source_paths(list(files), data_dir, cache, None), cache, min_words, max_words)
    return list(dict.fromkeys(index.sentence(i) for i in range(len(index))))[:max_sentences]


def mean_chars(sentences: Sequence[str], sample: int = 1000) -> float:
    """Mean length in characters of the first ``sample`` sentences: what an encoding-time estimate scales with."""
    head = sentences[:sample]
    return sum(len(s) for s in head) / len(head) if len(head) else 0.0
