"""The readings of one encoder, each computed once per sentence: in memory for the process, on disk across runs.

``fill`` encodes what it lacks in ONE ``encode`` call in the caller's order, so a cold store computes exactly what
``represent`` would."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.encoders.layer_memo import Ids, LayerMemo, LayerMemoEncoder, RecordingEncoder
from sts_lightning.embeddings.scoring.reading import LAYER, Reading
from sts_lightning.embeddings.scoring.reading_cache import ReadingCache, row_digest


class ReadingStore:
    """Readings of a frozen ``encoder`` per sentence; ``cache``: the on-disk cache (``None``: memory only)."""

    def __init__(self, encoder: BaseEncoder, cache: ReadingCache | None = None) -> None:
        self.encoder, self.cache = encoder, cache if cache is not None and cache.enabled else None
        self.vectors: dict[Reading, dict[str, torch.Tensor]] = {}
        self.memos: dict[Reading, LayerMemo] = {}
        self.ids_of: dict[str, Ids] = {}
        self.from_disk = 0  # readings (sentence x reading) read back from the on-disk cache
        self.computed = 0  # sentences encoded here (one forward pass computes all their readings)

    def _ids(self, sentences: Sequence[str]) -> list[Ids]:
        new = [s for s in dict.fromkeys(sentences) if s not in self.ids_of]
        if new:
            self.ids_of.update(zip(new, map(tuple, self.encoder.tokenize(new)), strict=True))
        return [self.ids_of[s] for s in sentences]

    def _has(self, reading: Reading, sentence: str) -> bool:
        if reading.kind == LAYER:
            return self.ids_of[sentence] in self.memos[reading]
        return sentence in self.vectors[reading]

    def fill(self, readings: Sequence[Reading], sentences: Sequence[str], batch_size: int | None = None,
             desc: str | None = None) -> None:
        """Make every reading of every sentence available: from memory, from disk, else ONE encode of the rest."""
        readings = list(dict.fromkeys(readings))
        for r in readings:
            if r.kind == LAYER:
                self.memos.setdefault(r, LayerMemo(r.layer))
            else:
                self.vectors.setdefault(r, {})
        unique = list(dict.fromkeys(sentences))
        # Token ids key the disk cache and the layer memos; pooled readings in memory are keyed by text, so without
        # those the encoder tokenizes itself (on CUDA in a thread, overlapped with the forward: encoders/prefetch.py).
        keyed = self.cache is not None or any(r.kind == LAYER for r in readings)
        if keyed:
            self._ids(unique)
        if self.cache is not None:
            for r in readings:
                self._load(r, [s for s in unique if not self._has(r, s)])
        lacking = [r for r in readings if any(not self._has(r, s) for s in unique)]
        if not lacking:
            return
        todo = [s for s in unique if any(not self._has(r, s) for r in lacking)]
        new = {r: [s for s in todo if not self._has(r, s)] for r in lacking}
        self._encode(lacking, todo, batch_size, desc, keyed)
        self.computed += len(todo)
        if self.cache is not None:
            for r in lacking:
                self.cache.save(r, {row_digest(self.ids_of[s], s): self._row(r, s) for s in new[r]})

    def _encode(self, readings: list[Reading], sentences: list[str], batch_size: int | None, desc: str | None,
                keyed: bool = True) -> None:
        pooled = [r for r in readings if r.kind != LAYER]
        memos = [self.memos[r] for r in readings if r.kind == LAYER]
        runner = RecordingEncoder(self.encoder, memos) if memos else self.encoder

        def pool_all(batch):
            if not pooled:  # layer readings only: the memos record them, nothing to pool
                return torch.zeros(batch.attention_mask.shape[0], 1)
            return {r.key: r.fn(batch) for r in pooled}

        out = runner.encode(sentences, pool_all, batch_size=batch_size,  # tokenized once: the ids it keys by
                            desc=desc or f"{self.encoder.name}: {', '.join(r.key for r in readings)}",
                            ids=[self.ids_of[s] for s in sentences] if keyed else None)
        for r in pooled:
            table = self.vectors[r]
            for row, s in enumerate(sentences):
                table.setdefault(s, out[r.key][row])

    def _row(self, reading: Reading, sentence: str):
        if reading.kind == LAYER:
            states, special = self.memos[reading].rows[self.ids_of[sentence]]
            return states.float().numpy(), special.numpy()
        return self.vectors[reading][sentence].unsqueeze(0).numpy(), None

    def _load(self, reading: Reading, missing: list[str]) -> None:
        digests = {row_digest(self.ids_of[s], s): s for s in missing}
        found = self.cache.load(reading, set(digests))
        for digest, (rows, special) in found.items():
            sentence = digests[digest]
            if reading.kind == LAYER:
                self.memos[reading].put(self.ids_of[sentence], torch.from_numpy(rows.copy()),
                                        torch.from_numpy(special.copy()))
            else:
                self.vectors[reading][sentence] = torch.from_numpy(rows[0].copy())
        self.from_disk += len(found)
        self.cache.hits += len(found)

    def pooled(self, reading: Reading, sentences: Sequence[str], batch_size: int | None = None) -> torch.Tensor:
        """``(n, d)`` rows of a pooled reading for ``sentences`` (in order), encoding what is not stored yet."""
        self.fill([reading], sentences, batch_size)
        table = self.vectors[reading]
        return torch.stack([table[s] for s in sentences])

    def layer_view(self, reading: Reading) -> LayerMemoEncoder:
        """An encoder serving the layer as hidden state -1 (a sentence not stored yet runs its batch)."""
        memo = self.memos.setdefault(reading, LayerMemo(reading.layer))
        return LayerMemoEncoder(self.encoder, layer=reading.layer, memo=memo)

    def knows(self, reading: Reading, sentences: Sequence[str]) -> bool:
        """Whether every sentence's reading is in memory (so serving it runs no pass)."""
        if reading not in self.vectors and reading not in self.memos:
            return False
        layer = reading.kind == LAYER
        return all((not layer or s in self.ids_of) and self._has(reading, s) for s in sentences)
