"""Sentence files, one sentence a line: scanned once into a cached index of byte spans, read by offset.

Why: unsupervised objectives (CT, SED, the VAEs) read millions of lines, so the data stays on disk.
``load_spans`` scans each file once into the byte spans of its usable lines (cached, keyed by path, size,
mtime and the word filters); ``SentenceIndex`` then reads any line with ``os.pread`` in any worker.
Empty or whitespace-only lines and lines that are not UTF-8 are skipped and counted with file:line,
never yielded. Your own ``.tsv`` / ``.csv`` / ``.jsonl`` / ``.parquet`` files are written once into a text file
of their text column (``datamodules.sentence_tables``) and then read like any other. Hub sources (``hub:<dataset>[:<config>]:<split>``, column ``text``, e.g.
``hub:wikitext:wikitext-103-raw-v1:train``) are streamed once into a text file in the cache
directory (one row a line) and then read like a local file; so are ``sts:<task>`` sources, the
distinct sentences of local STS tasks without their scores (BERT-flow's target-domain setting).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sts_lightning.datamodules.sentence_tables import sentence_file_paths
from sts_lightning.datamodules.table_files import refuse_local_hub
from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.embeddings.io.atomic import atomic_file, atomic_write
from sts_lightning.embeddings.io.cache_root import cache_dir_or_root
from sts_lightning.embeddings.io.input_file import require_file
from sts_lightning.sts.tasks import load_task

log = logging.getLogger(__name__)
SHOW_LINES = 5


def scan_file(path: Path, min_words: int = 1, max_words: int | None = None) -> tuple[np.ndarray, dict]:
    """Byte spans ``[start, end)`` of the usable lines of ``path`` and what was skipped (reason -> count).

    Reads bytes and splits on ``\\n`` only, so the offsets are exact and U+2028 & co. stay inside a line.
    """
    require_file(path)
    spans = array("q")  # flat start, end pairs: 16 bytes a line, not a Python tuple
    skipped: Counter = Counter()
    where: dict[str, list[str]] = {}
    offset = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            body = raw.rstrip(b"\r\n")
            bom = 3 if lineno == 1 and body.startswith(b"\xef\xbb\xbf") else 0
            start, end = offset + bom, offset + len(body)
            offset += len(raw)
            try:
                words = len(body[bom:].decode("utf-8").split())
            except UnicodeDecodeError:
                reason = "not UTF-8"
            else:
                reason = ("empty" if words == 0 else "too few words" if words < min_words
                          else "too many words" if max_words is not None and words > max_words else "")
            if not reason:
                spans.extend((start, end))
                continue
            skipped[reason] += 1
            if len(where.setdefault(reason, [])) < SHOW_LINES:
                where[reason].append(f"{path}:{lineno}")
    report = "; ".join(f"{r}: {n} ({', '.join(where[r])}{', ...' if n > SHOW_LINES else ''})"
                       for r, n in skipped.items())
    return np.frombuffer(spans, dtype=np.int64).reshape(-1, 2), {"skipped": dict(skipped), "report": report}


def _read_index(cached: Path) -> tuple[np.ndarray, dict] | None:
    """A line-index cache, or ``None`` (with a warning) when it is damaged: derived data is rebuilt, not trusted.

    Why: a truncated or garbled ``.npz`` (a full disk, a copy cut short) raised ``BadZipFile`` / "Bad CRC-32"
    in every later run; pickled object arrays are refused rather than unpickled.
    """
    try:
        with np.load(cached, allow_pickle=False) as z:
            spans, stats = z["spans"], json.loads(str(z["stats"]))
        if spans.dtype != np.int64 or spans.ndim != 2 or spans.shape[1] != 2 or not isinstance(stats, dict):
            raise ValueError(f"spans {spans.dtype} {spans.shape}")
        return spans, stats
    except Exception as err:  # noqa: BLE001 -- any unreadable cache is rebuilt, whatever broke it
        log.warning("%s: damaged line-index cache (%s: %s); rebuilding it", cached, type(err).__name__, err)
        return None


def load_spans(path: Path, cache_dir: Path | None, min_words: int = 1,
               max_words: int | None = None) -> tuple[np.ndarray, dict]:
    """``scan_file`` through a cache keyed by path, size, mtime and the word filters."""
    if cache_dir is None or not path.is_file():
        return scan_file(path, min_words, max_words)  # raises the clear "file not found" for a missing file
    st = path.stat()
    key = hashlib.sha1(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{min_words}|{max_words}".encode())
    cached = Path(cache_dir) / "sentence-index" / f"{path.name}.{key.hexdigest()[:16]}.npz"
    if cached.is_file():
        found = _read_index(cached)
        if found is not None:
            return found
    spans, stats = scan_file(path, min_words, max_words)
    with atomic_file(cached, needed=spans.nbytes) as tmp, tmp.open("wb") as fh:  # a reader sees none or a whole one
        np.savez(fh, spans=spans, stats=np.array(json.dumps(stats)))
    return spans, stats


def materialize_hub(spec: str, cache_dir: Path, max_rows: int | None = None) -> Path:
    """Stream ``hub:<dataset>[:<config>]:<split>`` once into ``cache_dir/hub/...txt``, one row a line."""
    parts = spec.split(":")[1:]
    if len(parts) not in (2, 3):
        raise ConfigError(f"hub source {spec!r} must look like 'hub:<dataset>[:<config>]:<split>'")
    name, config, split = parts[0], (parts[1] if len(parts) == 3 else None), parts[-1]
    refuse_local_hub(spec, name)
    out = Path(cache_dir) / "hub" / f"{'_'.join(parts).replace('/', '__')}.{max_rows or 'all'}.txt"
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


@dataclass
class SentenceIndex:
    """Usable lines of several files as (file id, byte span); reads a line with ``os.pread``."""

    files: list[Path]
    file_ids: np.ndarray
    spans: np.ndarray
    skipped: dict[str, int]

    def __len__(self) -> int:
        return len(self.file_ids)

    def sentence(self, i: int) -> str:
        fds = self.__dict__.setdefault("_fds", {})  # opened lazily in each worker process
        f = int(self.file_ids[i])
        if f not in fds:
            fds[f] = os.open(self.files[f], os.O_RDONLY)
        start, end = self.spans[i]
        return os.pread(fds[f], int(end - start), int(start)).decode("utf-8").strip()

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_fds"}  # descriptors don't cross processes

    def split_tail(self, n: int) -> tuple[SentenceIndex, list[str]]:
        """(the index without its last ``n`` sentences, those ``n`` sentences in order): a held-out set.

        Why the tail: it needs no RNG and no extra file, is identical on every rank and every run of the same
        sources, and comes from the same corpus the model trains on (held-out loss measures fitting, not a
        domain shift); the training stream never sees it.
        """
        if not 0 < n < len(self):
            raise DataError(f"cannot hold out {n} of {len(self)} usable sentences (need 0 < n < {len(self)})")
        head = SentenceIndex(self.files, self.file_ids[:-n], self.spans[:-n], self.skipped)
        return head, [self.sentence(i) for i in range(len(self) - n, len(self))]

    @classmethod
    def build(cls, files: Sequence[Path], cache_dir: Path | None, min_words: int = 1,
              max_words: int | None = None, max_sentences: int | None = None) -> SentenceIndex:
        """Index the files (in the given order, then the first ``max_sentences``), logging what was skipped."""
        ids, spans, skipped = [], [], Counter()
        for f, path in enumerate(files):
            s, stats = load_spans(Path(path), cache_dir, min_words, max_words)
            ids.append(np.full(len(s), f, dtype=np.int32))
            spans.append(s)
            skipped.update(stats["skipped"])
            if stats["report"]:
                log.warning("%s: skipped %d lines: %s", path, sum(stats["skipped"].values()), stats["report"])
        index = cls(list(map(Path, files)), np.concatenate(ids)[:max_sentences],
                    np.concatenate(spans)[:max_sentences], dict(skipped))
        if not len(index):
            raise DataError(f"no usable sentences in {[str(f) for f in files]}")
        return index


def materialize_sts(spec: str, data_dir: str | None, cache_dir: Path) -> Path:
    """``sts:<task>[+<task>...]``: the distinct sentences of local STS tasks, one a line, scores dropped.

    Why: BERT-flow's best setting fits the flow on the unlabelled sentences of the target task itself
    (Li et al. 2020, "target" rows); this makes those sentences a training source like any file. The file
    is named by a hash of the sentences, so a changed data directory gives a new file.
    """

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
    """One-sentence-a-line files of the sources, in order: local text files as they are (absolute, or relative
    to the data directory or else the working directory; a folder gives its files); local tables
    (``.tsv``/``.csv``/``.jsonl``/``.parquet``, ``datamodules.sentence_tables``; ``columns`` names their text
    column) and ``hub:`` sources written once into ``cache_dir``; ``sts:`` sources (the sentences of local STS
    tasks) written once into ``cache_dir``."""

    def paths(f: str) -> list[Path]:
        if f.startswith("hub:"):
            return [materialize_hub(f, cache_dir, max_sentences)]
        if f.startswith("sts:"):
            return [materialize_sts(f, data_dir, cache_dir)]
        return sentence_file_paths(f, data_dir, cache_dir, columns, max_malformed_fraction)

    return [p for f in files for p in paths(f)]


def read_sentences(files: Sequence[str], data_dir: str | None, min_words: int = 1, max_words: int | None = None,
                   max_sentences: int | None = None, cache_dir: str | os.PathLike | None = None) -> list[str]:
    """The usable lines of sentence files, de-duplicated in order, then the first ``max_sentences``.

    Why de-duplicated: a fitting corpus (meta-embeddings) weighs every sentence once; the same list (and so
    the same source-cache key) comes back for the same arguments.
    """
    cache = cache_dir_or_root(cache_dir)
    index = SentenceIndex.build(source_paths(list(files), data_dir, cache, None), cache, min_words, max_words)
    return list(dict.fromkeys(index.sentence(i) for i in range(len(index))))[:max_sentences]
