"""Plain sentences, one a line (Wikipedia, One Billion Word), as a stream sharded by rank x worker.

Why this shape: unsupervised objectives (CT, SED, the VAEs) read millions of lines, so the data stays on
disk. ``prepare_data`` scans each file once into an index of byte spans of its usable lines (cached,
keyed by path, size and mtime); workers then read lines by offset. Each epoch all ranks draw the same
permutation (seeded by ``(seed, epoch)``); position ``i`` of it goes to shard ``i % (world_size *
workers)``, shard = ``rank * workers + worker``. The permutation is cut to a multiple of ``world_size
* workers * per_device_batch`` so every worker yields only full batches and every rank the SAME number
of batches (an IterableDataset cannot be padded by a DistributedSampler, and unequal counts hang DDP).
That drops up to ``world_size * workers * per_device_batch - 1`` sentences per epoch (a different,
random set each epoch when shuffling; logged in ``setup``).

Empty or whitespace-only lines and lines that are not UTF-8 are skipped and counted with file:line,
never yielded. Hub sources (``hub:<dataset>[:<config>]:<split>``, column ``text``, e.g.
``hub:wikitext:wikitext-103-raw-v1:train``) are streamed once into a text file in the cache
directory (one row a line) and then read like a local file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from datamodules.nli import per_device_batch_size
from embeddings.errors import ConfigError, DataError
from sts.tasks import resolve_data_dir

log = logging.getLogger(__name__)
SHOW_LINES = 5
DEFAULT_CACHE = os.environ.get("STS_CACHE_DIR", "~/.cache/sts-lightning")


def items_per_shard(n_items: int, world_size: int, num_workers: int, per_device_batch: int) -> int:
    """Sentences each (rank, worker) yields per epoch: a whole number of full batches, equal everywhere."""
    shards = world_size * max(num_workers, 1)
    return n_items // (shards * per_device_batch) * per_device_batch


def shard_indices(n_items: int, rank: int, world_size: int, worker: int, num_workers: int,
                  per_device_batch: int, epoch: int, seed: int, shuffle: bool = True) -> np.ndarray:
    """Item indices that one (rank, worker) yields in one epoch, in order (pure, so it is unit-tested).

    ``num_workers=0`` means the main process is the one worker.
    """
    workers = max(num_workers, 1)
    if not (0 <= rank < world_size and 0 <= worker < workers and per_device_batch >= 1):
        raise ConfigError(f"invalid shard rank={rank}/{world_size} worker={worker}/{workers} "
                          f"per_device_batch={per_device_batch}")
    shards = world_size * workers
    used = items_per_shard(n_items, world_size, num_workers, per_device_batch) * shards
    order = np.random.default_rng([seed, epoch]).permutation(n_items) if shuffle else np.arange(n_items)
    return order[rank * workers + worker:used:shards]


def scan_file(path: Path, min_words: int = 1, max_words: int | None = None) -> tuple[np.ndarray, dict]:
    """Byte spans ``[start, end)`` of the usable lines of ``path`` and what was skipped (reason -> count).

    Reads bytes and splits on ``\\n`` only, so the offsets are exact and U+2028 & co. stay inside a line.
    """
    if not path.is_file():
        raise DataError(f"{path}: file not found")
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


def load_spans(path: Path, cache_dir: Path | None, min_words: int = 1,
               max_words: int | None = None) -> tuple[np.ndarray, dict]:
    """``scan_file`` through a cache keyed by path, size, mtime and the word filters."""
    if cache_dir is None:
        return scan_file(path, min_words, max_words)
    st = path.stat()
    key = hashlib.sha1(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{min_words}|{max_words}".encode())
    cached = Path(cache_dir) / "sentence-index" / f"{path.name}.{key.hexdigest()[:16]}.npz"
    if cached.is_file():
        with np.load(cached) as z:
            return z["spans"], json.loads(str(z["stats"]))
    spans, stats = scan_file(path, min_words, max_words)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".tmp{os.getpid()}")
    with tmp.open("wb") as fh:
        np.savez(fh, spans=spans, stats=np.array(json.dumps(stats)))
    os.replace(tmp, cached)  # atomic: a concurrent reader sees no file or a whole one
    return spans, stats


def materialize_hub(spec: str, cache_dir: Path, max_rows: int | None = None) -> Path:
    """Stream ``hub:<dataset>[:<config>]:<split>`` once into ``cache_dir/hub/...txt``, one row a line."""
    parts = spec.split(":")[1:]
    if len(parts) not in (2, 3):
        raise ConfigError(f"hub source {spec!r} must look like 'hub:<dataset>[:<config>]:<split>'")
    name, config, split = parts[0], (parts[1] if len(parts) == 3 else None), parts[-1]
    out = Path(cache_dir) / "hub" / f"{'_'.join(parts).replace('/', '__')}.{max_rows or 'all'}.txt"
    if out.is_file():
        return out
    try:
        from datasets import load_dataset

        rows = load_dataset(name, config, split=split, streaming=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp, written, blank = out.with_suffix(f".tmp{os.getpid()}"), 0, 0
        with tmp.open("w", encoding="utf-8") as fh:
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
    os.replace(tmp, out)
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


class SentenceStream(IterableDataset):
    """One rank's share of the sentences; each DataLoader worker takes its own shard (``shard_indices``).

    Args:
        index: the sentences.
        per_device_batch: the DataLoader's batch size (equal batch counts are computed from it).
        rank, world_size: this process's place in the DDP group.
        num_workers: the DataLoader's ``num_workers`` (0 = main process); checked when iterating.
        seed, shuffle: the per-epoch permutation, identical on all ranks.
    """

    def __init__(self, index: SentenceIndex, per_device_batch: int, rank: int = 0, world_size: int = 1,
                 num_workers: int = 0, seed: int = 0, shuffle: bool = True):
        self.index, self.batch, self.rank, self.world_size = index, per_device_batch, rank, world_size
        self.num_workers, self.seed, self.shuffle, self.epoch = num_workers, seed, shuffle, 0
        shard_indices(0, rank, world_size, 0, num_workers, per_device_batch, 0, seed)  # validates

    def set_epoch(self, epoch: int) -> None:
        """Pick the epoch's permutation; must happen before the DataLoader starts its workers."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        """Sentences this rank yields per epoch (all its workers): exact, so ``len(loader)`` is too."""
        return items_per_shard(len(self.index), self.world_size, self.num_workers, self.batch) * max(
            self.num_workers, 1)

    def dropped(self) -> int:
        """Sentences left out per epoch so that every rank has the same number of full batches."""
        return len(self.index) - len(self) * self.world_size

    def iter_shard(self, worker: int) -> Iterator[str]:
        """The sentences one worker of this rank yields this epoch."""
        for i in shard_indices(len(self.index), self.rank, self.world_size, worker, self.num_workers,
                               self.batch, self.epoch, self.seed, self.shuffle):
            yield self.index.sentence(i)

    def __iter__(self) -> Iterator[str]:
        info = get_worker_info()
        workers = info.num_workers if info is not None else 0
        if workers != self.num_workers:
            raise ConfigError(f"SentenceStream was built for num_workers={self.num_workers} but is read "
                              f"with {workers}: shards would overlap or be lost")
        return self.iter_shard(info.id if info is not None else 0)


def collate_sentences(batch: list[str]) -> dict[str, list[str]]:
    """Raw strings: the LightningModule tokenizes (the encoder owns its tokenizer)."""
    return {"sentences": list(batch)}


class _EpochLoader(DataLoader):
    """Sets the stream's epoch right before each epoch's iterator (and its workers) is created."""

    def __init__(self, *args, epoch_fn: Callable[[], int | None], **kwargs):
        super().__init__(*args, **kwargs)
        self.epoch_fn = epoch_fn

    def __iter__(self):
        epoch = self.epoch_fn()
        if epoch is not None:
            self.dataset.set_epoch(epoch)
        return super().__iter__()


def _trainer_epoch(trainer) -> int | None:
    """What Lightning hands samplers' ``set_epoch``: epochs processed so far, right after a resume too.

    (``current_epoch`` lags by one when resuming from an end-of-epoch checkpoint.)
    """
    if trainer is None:
        return None
    loop = getattr(trainer, "fit_loop", None)
    return loop.epoch_progress.current.processed if loop is not None else trainer.current_epoch


def source_paths(files: Sequence[str], data_dir: str | None, cache_dir: Path,
                 max_sentences: int | None) -> list[Path]:
    """Local files under the data directory, ``hub:`` sources streamed once into ``cache_dir``."""
    local = [f for f in files if not f.startswith("hub:")]
    root = resolve_data_dir(data_dir) if local else None
    return [materialize_hub(f, cache_dir, max_sentences) if f.startswith("hub:") else root / f for f in files]


class SentenceDataModule(LightningDataModule):
    """Training batches ``{"sentences": list[str]}`` from one-sentence-a-line files.

    Under a Trainer the epoch is read from the fit loop each time the loader is iterated (also after
    resuming), so nothing has to call ``set_epoch``; workers are not persistent because they copy the
    dataset (and its epoch) when they start.

    Args:
        data_dir: the data directory; ``None`` falls back to ``$STS_DATA_DIR`` (only for local files).
        files: paths relative to ``data_dir`` (or absolute), or ``hub:<dataset>[:<config>]:<split>``.
        batch_size: GLOBAL batch size; every device gets ``batch_size // world_size``.
        num_workers: DataLoader worker processes (each reads its own shard).
        seed, shuffle: the per-epoch permutation, identical on all ranks.
        max_sentences: use only the first N usable sentences (in file order).
        min_words, max_words: drop lines with fewer / more whitespace-separated words.
        cache_dir: where line indexes and hub text files are kept (default ``$STS_CACHE_DIR`` or
            ``~/.cache/sts-lightning``).
    """

    def __init__(self, data_dir: str | None = None, files: Sequence[str] | str = ("wiki/wiki_sentences_100k.txt",),
                 batch_size: int = 64, num_workers: int = 0, seed: int = 0, shuffle: bool = True,
                 max_sentences: int | None = None, min_words: int = 1, max_words: int | None = None,
                 cache_dir: str | None = None):
        super().__init__()
        self.data_dir, self.files = data_dir, [files] if isinstance(files, str) else [str(f) for f in files]
        self.batch_size, self.num_workers, self.seed, self.shuffle = batch_size, num_workers, seed, shuffle
        self.max_sentences, self.min_words, self.max_words = max_sentences, min_words, max_words
        self.cache_dir = Path(cache_dir or DEFAULT_CACHE).expanduser()
        self.dataset: SentenceStream | None = None

    def _paths(self) -> list[Path]:
        return source_paths(self.files, self.data_dir, self.cache_dir, self.max_sentences)

    def prepare_data(self) -> None:
        """Download hub sources and index every file once per node; ``setup`` then reads the cache."""
        for path in self._paths():
            load_spans(path, self.cache_dir, self.min_words, self.max_words)

    def setup(self, stage: str | None = None) -> None:
        trainer = self.trainer
        rank, world = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        index = SentenceIndex.build(self._paths(), self.cache_dir, self.min_words, self.max_words,
                                    self.max_sentences)
        self.dataset = SentenceStream(index, per_device_batch_size(self.batch_size, world), rank, world,
                                      self.num_workers, self.seed, self.shuffle)
        if len(self.dataset) == 0:
            need = world * max(self.num_workers, 1) * self.dataset.batch
            raise DataError(f"{len(index)} usable sentences are fewer than one batch for every worker of "
                            f"every rank needs (world_size x max(num_workers, 1) x per-device batch = {need})")
        log.info("sentences: %d usable (%s skipped); %d batches per rank per epoch; %d trailing sentences "
                 "dropped per epoch so all ranks get equal batches", len(index), index.skipped,
                 len(self.dataset) // self.dataset.batch, self.dataset.dropped())

    def set_epoch(self, epoch: int) -> None:
        """For use outside a Trainer (a Trainer's current epoch wins when one is attached)."""
        if self.dataset is not None:
            self.dataset.set_epoch(epoch)

    def train_dataloader(self) -> DataLoader:
        if self.dataset is None:
            self.setup("fit")
        if self.num_workers > 0:
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        return _EpochLoader(self.dataset, batch_size=self.dataset.batch, num_workers=self.num_workers,
                            collate_fn=collate_sentences, persistent_workers=False,
                            epoch_fn=lambda: _trainer_epoch(self.trainer))
