"""Token states of one frozen encoder layer, encoded once into a memory-mapped, ragged on-disk cache (Latte-Mix).

Only real tokens: ``states.npy`` ``(total_tokens, hidden)``, ``offsets.npy`` ``(n + 1,)`` and a sidecar ``.json``
with the key and shapes, written atomically (arrays first); a cache that disagrees with the key is rebuilt.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from sts_lightning.datamodules.cached_embeddings import model_fingerprint
from sts_lightning.embeddings.console import progress
from sts_lightning.embeddings.encoders.precision import key_entry
from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.embeddings.io.atomic import atomic_files
from sts_lightning.embeddings.io.npy_cache import (
    key_digest,
    non_finite_rows,
    open_npy_memmap,
    read_sidecar,
    write_sidecar,
)
from sts_lightning.embeddings.sources.cache import sentences_digest
from sts_lightning.embeddings.stop_request import check_stop

log = logging.getLogger(__name__)
CACHE_VERSION = 1
DTYPES = {"float32": np.float32, "float16": np.float16}


def cache_key(model: str, layer: int, max_length: int | None, dtype: str, sentences: Sequence[str],
              precision: str = "fp32") -> dict:
    """``dtype``: how the states are stored; ``precision``: how the encoder computed them."""
    return {"version": CACHE_VERSION, "model": model_fingerprint(model), "layer": int(layer),
            "max_length": max_length, "dtype": dtype, "sentences": sentences_digest(sentences),
            "num_sentences": len(sentences), **key_entry(precision)}


def cache_stem(cache_dir: Path, model: str, key: dict) -> Path:
    """``<cache_dir>/token_states/<model>.layer<l>.<digest>``; the arrays and sidecar add suffixes."""
    digest = key_digest(key)
    return cache_dir / "token_states" / f"{Path(model).name}.layer{key['layer']}.{digest}"


def _files(stem: Path) -> tuple[Path, Path, Path]:
    return (stem.with_name(stem.name + ".states.npy"), stem.with_name(stem.name + ".offsets.npy"),
            stem.with_name(stem.name + ".json"))


def check_cache(stem: Path, key: dict) -> str:
    """Why the cache at ``stem`` cannot be used (``""`` if it can)."""
    states_file, offsets_file, meta_file = _files(stem)
    if not all(p.is_file() for p in (states_file, offsets_file, meta_file)):
        return "missing"
    info, problem = read_sidecar(meta_file, {"key": key})
    if problem:
        return problem.replace("its key", "its key (model, layer, max length, dtype or sentences)")
    try:
        states = np.load(states_file, mmap_mode="r")
        offsets = np.load(offsets_file, mmap_mode="r")
    except (OSError, ValueError) as err:  # a truncated .npy fails numpy's length check
        return f"unreadable ({err})"
    if list(states.shape) != info.get("states_shape") or states.dtype != DTYPES[key["dtype"]]:
        return f"states {states.shape} {states.dtype} do not match the sidecar {info.get('states_shape')}"
    if len(offsets) != key["num_sentences"] + 1 or int(offsets[-1]) != states.shape[0]:
        return "offsets do not match the states array"
    bad = non_finite_rows(states)
    if bad:
        return f"{len(bad)} token states hold NaN or infinite values (first: row {bad[0]})"
    return ""


def open_cache(stem: Path) -> tuple[np.ndarray, np.ndarray]:
    """The states (copy-on-write map: pages shared by the ranks of a node) and offsets."""
    states_file, offsets_file, _ = _files(stem)
    return np.load(states_file, mmap_mode="c"), np.asarray(np.load(offsets_file))


def cache_bytes(stem: Path) -> int:
    return sum(p.stat().st_size for p in _files(stem) if p.is_file())


def build_cache(stem: Path, key: dict, encoder, sentences: Sequence[str], layer: int, batch_size: int = 64) -> None:
    """Encode ``sentences`` into the cache at ``stem`` atomically, in bounded host memory (a sized map)."""
    n_layers = encoder.num_layers
    if not -n_layers <= layer < n_layers:
        raise ConfigError(f"layer {layer} out of range for {encoder.name}: hidden states 0..{n_layers - 1} "
                          f"(or -{n_layers}..-1)")
    ids = encoder.tokenize(list(sentences))
    lengths = np.array([len(x) for x in ids], dtype=np.int64)
    if (lengths == 0).any():
        raise DataError(f"{int((lengths == 0).sum())} sentences have no tokens for {encoder.name}")
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    states_file, offsets_file, meta_file = _files(stem)
    dtype = DTYPES[key["dtype"]]
    # arrays first, the sidecar last: a sidecar never describes arrays not yet in place
    with atomic_files(states_file, offsets_file, meta_file) as tmp:
        out = open_npy_memmap(tmp[0], dtype=dtype, shape=(int(offsets[-1]), encoder.hidden_size))
        order = np.argsort(-lengths, kind="stable")
        with torch.inference_mode():
            for start in progress(range(0, len(order), batch_size), desc=f"caching token states ({encoder.name})",
                                  unit="batch", disable=len(order) < 2000):
                check_stop("caching token states")  # a SIGTERM: nothing cached, the temporary files removed
                rows = order[start:start + batch_size]
                batch = encoder.forward_ids([ids[i] for i in rows])
                states = batch.hidden_states[layer].float().cpu().numpy()
                real = batch.attention_mask.sum(1).cpu().numpy()
                for j, i in enumerate(rows):
                    if real[j] != lengths[i]:
                        raise DataError(f"{encoder.name}: sentence {i} has {lengths[i]} tokens after tokenize but "
                                        f"{real[j]} in the forward pass")
                    out[offsets[i]:offsets[i + 1]] = states[j, :lengths[i]]
        out.flush()
        shape = list(out.shape)
        bad = non_finite_rows(out)
        del out
        if bad:  # never cache (and train on) NaN: the encoder is broken, say so here
            raise DataError(f"{encoder.name}: {len(bad)} token states of hidden state {layer} are NaN or infinite "
                            f"(first: row {bad[0]}); not cached")
        np.save(tmp[1], offsets)
        write_sidecar(tmp[2], {"key": key, "states_shape": shape})
    log.info("cached %d token states x %d (layer %d of %s, %d sentences) in %s", shape[0], shape[1], layer,
             encoder.name, len(sentences), states_file)
