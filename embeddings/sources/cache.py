"""Source vectors of a sentence list, computed once and kept in a ``.npy`` cache named by a hash of the source's
fingerprint and the sentences, so another corpus, model, pooling or prefix is never served stale vectors."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sts_lightning.embeddings.io.npy_cache import key_digest, load_npy_cache, read_sidecar, save_npy_cache
from sts_lightning.embeddings.sources.names import spec_source_name
from sts_lightning.embeddings.sources.sentence_source import SentenceSource

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
    digest = key_digest(key)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in source.name)
    return Path(cache_dir).expanduser() / "sources" / f"{safe}.{digest}.npy", key


def pending_sources(specs: Sequence, sentences: Sequence[str], cache_dir: str | os.PathLike) -> list:
    """The ``build_source`` specs whose vectors of ``sentences`` are not cached in ``cache_dir``, told from the cache
    files' names and sidecars alone (no source is built): what a first-step estimate must count as work."""
    digest, cached = sentences_digest(sentences), set()
    for meta in (Path(cache_dir).expanduser() / "sources").glob("*.json"):
        info, problem = read_sidecar(meta, {})
        if not problem and info.get("key", {}).get("sentences") == digest and meta.with_suffix(".npy").is_file():
            cached.add(info.get("source"))
    return [spec for spec in specs if spec_source_name(spec) not in cached]


def cached_source_vectors(source: SentenceSource, sentences: Sequence[str],
                          cache_dir: str | os.PathLike | None = None) -> np.ndarray:
    """``(len(sentences), source.dim)`` float32 (row i: sentence i); from the cache when valid, else encoded and
    cached (``cache_dir=None``: just encode)."""
    if cache_dir is None:
        return source.embed(list(sentences)).numpy().astype(np.float32)
    path, key = cache_file(source, sentences, cache_dir)
    cached = load_npy_cache(path, {"key": key}, f"{source.name} source vectors")
    if cached is not None:
        return cached
    vectors = source.embed(list(sentences)).numpy().astype(np.float32)
    save_npy_cache(path, vectors, {"key": key, "source": source.name})
    return vectors
