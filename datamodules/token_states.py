"""Frozen token states as training batches ``{"features": (B, T, H), "mask": (B, T)}`` for the token VAEs.

Sentences come from sentence files and/or NLI sources without their labels (``nli:snli:dev``: the unique premises
and hypotheses), encoded once per node into ``datamodules.token_state_cache``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from sts_lightning.datamodules.loader import ResumableDataModule
from sts_lightning.datamodules.nli_readers import load_source
from sts_lightning.datamodules.sentence_files import SentenceIndex, mean_chars, source_paths
from sts_lightning.datamodules.token_state_cache import (
    DTYPES,
    build_cache,
    cache_bytes,
    cache_key,
    cache_stem,
    check_cache,
    open_cache,
)
from sts_lightning.embeddings.encoders.hf import resolve_device
from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.encoders.precision import resolve_precision
from sts_lightning.embeddings.errors import ConfigError, DataError, unknown_choice
from sts_lightning.embeddings.io.cache_root import cache_dir_or_root

log = logging.getLogger(__name__)


class TokenStateDataset(Dataset):
    """Sentence ``i`` -> its ``(tokens_i, hidden)`` float32 states (a view of the memory map, copied)."""

    def __init__(self, states: np.ndarray, offsets: np.ndarray):
        self.states, self.offsets = states, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.from_numpy(np.asarray(self.states[self.offsets[i]:self.offsets[i + 1]], dtype=np.float32))


def collate_token_states(rows: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
    """Right-pad to the batch's longest sentence; ``mask`` is True on real tokens."""
    width = max(r.shape[0] for r in rows)
    features = torch.zeros(len(rows), width, rows[0].shape[1])
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for j, r in enumerate(rows):
        features[j, :r.shape[0]] = r
        mask[j, :r.shape[0]] = True
    return {"features": features, "mask": mask}


class TokenStateDataModule(ResumableDataModule):
    """Token states of ``layer`` of a frozen encoder, cached once (``dtype``: storage), as padded batches."""

    data_unit = "sentences"  # model card: one training item

    def __init__(self, data_dir: str | None = None, files: Sequence[str] | str = ("nli:snli:dev", "nli:snli:test"),
                 model_name_or_path: str = "all-MiniLM-L6-v2", layer: int = -1, max_length: int | None = None,
                 batch_size: int = 16, cache_dir: str | None = None, max_sentences: int | None = None,
                 dtype: str = "float32", num_workers: int = 0, seed: int = 0, shuffle: bool = True,
                 encode_batch_size: int = 64, encode_device: str = "auto", encode_precision: str = "fp32") -> None:
        super().__init__()
        if dtype not in DTYPES:
            raise unknown_choice("token-state dtype", dtype, DTYPES)
        self.data_dir, self.files = data_dir, [files] if isinstance(files, str) else [str(f) for f in files]
        if not self.files:
            raise ConfigError("TokenStateDataModule: files is empty")
        self.model_name_or_path, self.layer, self.max_length = str(model_name_or_path), int(layer), max_length
        self.batch_size, self.max_sentences, self.dtype = int(batch_size), max_sentences, dtype
        self.num_workers, self.seed, self.shuffle = num_workers, seed, shuffle
        self.encode_batch_size, self.encode_device = encode_batch_size, encode_device
        self.encode_precision = resolve_precision(encode_precision, resolve_device(encode_device))
        self.cache_dir = cache_dir_or_root(cache_dir)
        self.dataset: TokenStateDataset | None = None
        self._sentences: list[str] | None = None
        self._stem: Path | None = None

    # ------------------------------------------------------------------------------ sentences
    def sentences(self) -> list[str]:
        """The training sentences, de-duplicated in source order (read once per process)."""
        if self._sentences is None:

            found: list[str] = []
            plain = [f for f in self.files if not f.startswith("nli:")]
            for spec in self.files:
                if spec.startswith("nli:"):
                    pairs = load_source(spec[len("nli:"):], self.data_dir)
                    found += [s for pair in zip(pairs.premises, pairs.hypotheses, strict=True) for s in pair]
            if plain:
                index = SentenceIndex.build(source_paths(plain, self.data_dir, self.cache_dir, None), self.cache_dir)
                found += [index.sentence(i) for i in range(len(index))]
            unique = list(dict.fromkeys(s.strip() for s in found if s.strip()))
            self._sentences = unique[: self.max_sentences] if self.max_sentences else unique
            if not self._sentences:
                raise DataError(f"no sentences in {self.files}")
        return self._sentences

    def _key_and_stem(self) -> tuple[dict, Path]:
        key = cache_key(self.model_name_or_path, self.layer, self.max_length, self.dtype, self.sentences(),
                        self.encode_precision)
        return key, cache_stem(self.cache_dir, self.model_name_or_path, key)

    # --------------------------------------------------------------------------------- cache
    def pending_encodes(self) -> list[tuple[str, str, int, float]]:
        """``(what, encoder, sentences, mean characters)`` per pass ``prepare_data`` will run (for ``runs.first_step``)."""
        key, stem = self._key_and_stem()
        if not check_cache(stem, key):
            return []
        sentences = self.sentences()
        return [("caching token states", self.model_name_or_path, len(sentences), mean_chars(sentences))]

    def prepare_data(self) -> None:
        """Encode once per node unless a valid cache for this key exists (a bad one is rebuilt)."""
        key, stem = self._key_and_stem()
        problem = check_cache(stem, key)
        if not problem:
            log.info("using cached token states %s", stem)
            return
        if problem != "missing":
            log.warning("token-state cache %s is not usable (%s): rebuilding it", stem, problem)

        encoder = load_encoder(self.model_name_or_path, max_length=self.max_length,
                               batch_size=self.encode_batch_size, device=self.encode_device,
                               precision=self.encode_precision)
        build_cache(stem, key, encoder, self.sentences(), self.layer, self.encode_batch_size)

    def setup(self, stage: str | None = None) -> None:
        key, stem = self._key_and_stem()
        problem = check_cache(stem, key)
        if problem:
            raise DataError(f"token-state cache {stem} is not usable ({problem}): run prepare_data first")
        self._stem = stem
        self.dataset = TokenStateDataset(*open_cache(stem))
        log.info("token states: %d sentences, %d tokens x %d from %s", len(self.dataset),
                 self.num_tokens, self.feature_dim, stem)

    @property
    def feature_dim(self) -> int:
        return int(self.ready_dataset().states.shape[1])

    @property
    def num_tokens(self) -> int:
        return int(self.ready_dataset().states.shape[0])

    def cache_bytes(self) -> int:
        """Bytes on disk of this run's cache (states, offsets, sidecar)."""
        if self._stem is None:
            self.setup("fit")
        return cache_bytes(self._stem)

    def train_dataloader(self) -> DataLoader:
        return self.resumable_loader(collate_token_states)
