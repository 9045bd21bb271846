"""Source vectors of a sentence list, computed once and kept in a ``.npy`` cache.

Why: ensembles are fitted and distilled from FROZEN sources, and the slowest source (all-mpnet-base-v2,
~26 sentences/s on 2 CPU cores) would otherwise re-encode the same corpus for every method, seed and
ablation. The cache is named by a hash of the source's fingerprint and of the sentences themselves, so
another corpus, model file, pooling or prefix can never be served stale vectors. Written atomically
(temp file, then rename; the sidecar JSON last); a cache whose sidecar disagrees with the array, or that
does not load, is rebuilt with a warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from embeddings.sources.sentence_source import SentenceSource

log = logging.getLogger(__name__)
CACHE_VERSION = 1


def sentences_digest(sentences: Sequence[str]) -> str:
    h = hashlib.sha1()
    for s in sentences:
        h.update(s.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def cache_file(source: SentenceSource, sentences: Sequence[str], cache_dir: str | os.PathLike) -> tuple[Path, dict]:
    key = {"version": CACHE_VERSION, "source": source.fingerprint(), "sentences": sentences_digest(sentences),
           "count": len(sentences)}
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in source.name)
    return Path(cache_dir).expanduser() / "sources" / f"{safe}.{digest}.npy", key


def npy_cache_problem(path: Path, key: dict) -> str:
    """Why ``path`` (+ its ``.json`` sidecar) cannot be used, ``""`` if it can: missing, other key, truncated."""
    meta = path.with_suffix(".json")
    if not path.is_file() or not meta.is_file():
        return "missing"
    try:
        info = json.loads(meta.read_text())
        array = np.load(path, mmap_mode="r")
    except (OSError, ValueError) as err:
        return f"unreadable ({err})"
    if info.get("key") != key:
        return "its key differs from this run's"
    if list(array.shape) != info.get("shape") or array.dtype != np.float32:
        return f"array {array.shape} {array.dtype} does not match its sidecar {info.get('shape')}"
    return ""


def cached_source_vectors(source: SentenceSource, sentences: Sequence[str],
                          cache_dir: str | os.PathLike | None = None) -> np.ndarray:
    """``(len(sentences), source.dim)`` float32; from the cache when valid, else encoded and cached.

    Args:
        source: the frozen source.
        sentences: non-empty strings (order matters: row i is sentence i).
        cache_dir: cache root (``None``: no caching, just encode).
    """
    if cache_dir is None:
        return source.embed(list(sentences)).numpy().astype(np.float32)
    path, key = cache_file(source, sentences, cache_dir)
    problem = npy_cache_problem(path, key)
    if not problem:
        log.info("using cached %s vectors %s", source.name, path)
        return np.load(path)
    if problem != "missing":
        log.warning("source cache %s is not usable (%s): rebuilding it", path, problem)
    vectors = source.embed(list(sentences)).numpy().astype(np.float32)
    save_npy_atomic(path, vectors, {"key": key, "shape": list(vectors.shape), "source": source.name})
    return vectors


def save_npy_atomic(path: Path, array: np.ndarray, sidecar: dict) -> None:
    """``path`` (.npy) and its ``.json`` sidecar via temp files and renames: array first, so a sidecar never
    describes an array that is not in place; nothing half-written is left after a crash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}.npy")
    meta = path.with_suffix(f".tmp{os.getpid()}.json")
    try:
        np.save(tmp, array)
        meta.write_text(json.dumps(sidecar, indent=1))
        os.replace(tmp, path)
        os.replace(meta, path.with_suffix(".json"))
    finally:
        tmp.unlink(missing_ok=True)
        meta.unlink(missing_ok=True)
