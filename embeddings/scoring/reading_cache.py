"""The on-disk embedding cache: readings (``embeddings.scoring.reading``) of an encoder, per sentence, across runs.

Keyed by what decides the numbers: ``forward_fingerprint`` (weights, config, class), precision, dtype, device type,
max length and reading, and per row the sentence's text and token ids. ``<root>/<encoder>/<reading>.<digest>/``
holds one shard per write: ``<stamp>.npz`` (``keys`` (n, 16) uint8, ``rows`` (total, d) float32, ``offsets``
(n + 1,); layer readings add ``special``) and then its ``<stamp>.json``. An unusable shard is deleted with ONE warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.encoders.precision import key_entry
from sts_lightning.embeddings.io.atomic import atomic_files
from sts_lightning.embeddings.io.cache_root import cache_root
from sts_lightning.embeddings.io.encoder_identity import encoder_precision, tensors_sha256
from sts_lightning.embeddings.io.npy_cache import key_digest, non_finite_rows, read_sidecar, write_sidecar
from sts_lightning.embeddings.scoring.reading import LAYER, Reading

log = logging.getLogger(__name__)
CACHE_VERSION = 2  # 2: the weights' digest is encoder_identity.tensors_sha256 (no dtype text)
FOLDER = "embeddings"
Row = tuple[np.ndarray, np.ndarray | None]  # (rows of one sentence, special-token mask of a layer reading)


def weights_sha256(module: torch.nn.Module | torch.Tensor) -> str:
    """SHA-256 over the exact bytes of every tensor of ``state_dict`` (names and shapes included); the precision
    the weights compute in is a key entry of its own (``ReadingCache.base``)."""
    tensors = [("vectors", module)] if isinstance(module, torch.Tensor) else list(module.state_dict().items())
    return tensors_sha256(tensors)


def forward_fingerprint(encoder: BaseEncoder) -> dict | None:
    """What decides an encoder's outputs for given token ids (``None``: not a torch model); computed once per encoder
    object, so one whose weights change afterwards must be hashed again."""
    cached = getattr(encoder, "_forward_fingerprint", None)
    if cached is not None:
        return cached
    model = getattr(encoder, "model", None)
    if not isinstance(model, torch.nn.Module):
        return None
    config = getattr(model, "config", None)
    settings = {k: v for k, v in (config.to_dict() if config is not None else {}).items()
                if not k.startswith("_") and k not in ("transformers_version", "name_or_path")}
    special = getattr(encoder, "_special_ids", None)
    fingerprint = {"class": type(encoder).__name__, "weights_sha256": weights_sha256(model),
                   "config_sha1": key_digest(json.loads(json.dumps(settings, default=str)), 40),
                   "special_ids": None if special is None else [int(i) for i in special]}
    encoder._forward_fingerprint = fingerprint
    return fingerprint


def row_digest(ids: Sequence[int], sentence: str) -> bytes:
    """16 bytes naming one sentence: its token ids and its text (two strings that tokenise alike keep their own
    rows, as each had its own row in the pass that wrote them)."""
    digest = hashlib.blake2b(np.asarray(ids, dtype=np.int64).tobytes(), digest_size=16)
    digest.update(sentence.encode("utf-8", "surrogatepass"))
    return digest.digest()


def _files(shelf: Path, suffix: str) -> list[Path]:
    """The shards' files, not the hidden temporary copies of a write in progress (``embeddings.io.atomic``)."""
    return sorted(p for p in shelf.glob(f"*{suffix}") if not p.name.startswith("."))


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "encoder"


class ReadingCache:
    """The shelves of one encoder under ``root`` (default: ``<STS_CACHE_DIR>/embeddings``); off without a fingerprint."""

    def __init__(self, encoder: BaseEncoder, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root).expanduser() if root else cache_root() / FOLDER
        fingerprint = forward_fingerprint(encoder)
        self.enabled = fingerprint is not None
        self.base = {"version": CACHE_VERSION, "encoder": fingerprint, "dtype": "float32",
                     "device": torch.device(encoder.device).type, "max_length": getattr(encoder, "max_length", None),
                     **key_entry(encoder_precision(encoder))}
        self.folder = self.root / _safe(Path(str(encoder.name)).name)
        self.hits = self.misses = 0

    def key(self, reading: Reading) -> dict:
        return {**self.base, "reading": reading.key}

    def shelf(self, reading: Reading) -> Path:
        return self.folder / f"{_safe(reading.key.replace('/', '-'))}.{key_digest(self.key(reading))}"

    def load(self, reading: Reading, wanted: set[bytes]) -> dict[bytes, Row]:
        """The stored rows of ``wanted`` (token-id digests) found on the shelf; unusable shards removed, warned."""
        found: dict[bytes, Row] = {}
        shelf = self.shelf(reading)
        if not (self.enabled and wanted and shelf.is_dir()):
            return found
        key = self.key(reading)
        sidecars = _files(shelf, ".json")
        for data in _files(shelf, ".npz"):
            if data.with_suffix(".json") not in sidecars:
                self._drop(data, "an array without its sidecar (a write was cut off)")
        for meta in sidecars:
            arrays, problem = self._read(meta, key, reading.kind == LAYER)
            if problem:
                self._drop(meta, problem)
                continue
            keys, rows, offsets = arrays["keys"], arrays["rows"], arrays["offsets"]
            special = arrays.get("special")
            for i, k in enumerate(map(bytes, keys)):
                if k in wanted and k not in found:
                    lo, hi = int(offsets[i]), int(offsets[i + 1])
                    found[k] = (rows[lo:hi], None if special is None else special[lo:hi])
        return found

    @staticmethod
    def _read(meta: Path, key: dict, layer: bool) -> tuple[dict[str, np.ndarray], str]:
        info, problem = read_sidecar(meta, {"key": key})
        if problem:
            return {}, problem
        try:
            with np.load(meta.with_suffix(".npz")) as npz:
                arrays = {name: npz[name] for name in npz.files}
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as err:
            return {}, f"unreadable ({type(err).__name__}: {err})"
        names = {"keys", "rows", "offsets", *(("special",) if layer else ())}
        if set(arrays) != names:
            return {}, f"arrays {sorted(arrays)}, expected {sorted(names)}"
        keys, rows, offsets = arrays["keys"], arrays["rows"], arrays["offsets"]
        n = int(info.get("count", -1))
        if keys.shape != (n, 16) or offsets.shape != (n + 1,) or rows.ndim != 2 or rows.dtype != np.float32 \
                or int(offsets[-1]) != rows.shape[0] or np.any(np.diff(offsets) < 1) \
                or (layer and arrays["special"].shape != (rows.shape[0],)):
            return {}, f"inconsistent arrays (keys {keys.shape}, rows {rows.shape}, offsets {offsets.shape}, count {n})"
        bad = non_finite_rows(rows)
        if bad:
            return {}, f"{len(bad)} rows hold NaN or infinite values"
        return arrays, ""

    @staticmethod
    def _drop(path: Path, why: str) -> None:
        log.warning("embedding cache %s is not usable (%s): removed; its sentences are encoded again",
                    path.with_suffix(""), why)
        for suffix in (".npz", ".json"):
            path.with_suffix(suffix).unlink(missing_ok=True)

    def save(self, reading: Reading, rows: dict[bytes, Row]) -> Path | None:
        """Write ``rows`` (digest -> rows, special) as one new shard; returns its sidecar (``None``: nothing to write)."""
        if not (self.enabled and rows):
            return None
        keys = list(rows)
        values = [rows[k][0] for k in keys]
        arrays = {"keys": np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 16),
                  "rows": np.concatenate(values).astype(np.float32, copy=False),
                  "offsets": np.concatenate([[0], np.cumsum([len(v) for v in values])]).astype(np.int64)}
        if reading.kind == LAYER:
            arrays["special"] = np.concatenate([rows[k][1] for k in keys]).astype(bool)
        if non_finite_rows(arrays["rows"]):
            log.warning("embedding cache: %s of %s holds NaN or infinite values: not cached", reading.key,
                        self.folder.name)
            return None
        stem = self.shelf(reading) / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{secrets.token_hex(3)}"
        data, meta = stem.with_suffix(".npz"), stem.with_suffix(".json")
        try:
            with atomic_files(data, meta, needed=sum(a.nbytes for a in arrays.values())) as (tmp_data, tmp_meta):
                with open(tmp_data, "wb") as fh:
                    np.savez(fh, **arrays)
                write_sidecar(tmp_meta, {"key": self.key(reading), "count": len(keys),
                                         "rows_shape": list(arrays["rows"].shape)})
        except OSError as err:  # a full disk (DiskFullError's one line), a read-only cache: the scores need no cache
            log.warning("embedding cache: not written (%s); this run goes on without it", err)
            self.enabled = False
            return None
        return meta
