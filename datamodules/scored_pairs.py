"""Scored sentence pairs as training batches ``{"sentences1", "sentences2", "scores"}`` (supervised STS).

The input of ``lightning_modules.cosent``; sources and the normalisation to [0, 1]: ``datamodules.scored_pair_readers``.
Under DDP every rank gets equal batches (the ranking losses gather scores).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence

import torch
from torch.utils.data import DataLoader, Dataset

from sts_lightning.datamodules.loader import ResumableDataModule, per_device_batch_size
from sts_lightning.datamodules.mixture import describe_mixture, mixture_sampler
from sts_lightning.datamodules.mixture_rules import check_mixture, check_source_sizes
from sts_lightning.datamodules.scored_pair_readers import (
    ScoredPairs,
    check_score_scale,
    check_sources,
    load_scored_source,
)
from sts_lightning.datamodules.table_files import check_roles
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.model_card import DataFacts

log = logging.getLogger(__name__)


class ScoredPairDataset(Dataset):
    """Map-style (sentence1, sentence2, score in [0, 1]) rows, so Lightning can shard it with a DistributedSampler."""

    def __init__(self, parts: Sequence[ScoredPairs]):
        self.sentences1 = [s for p in parts for s in p.sentences1]
        self.sentences2 = [s for p in parts for s in p.sentences2]
        self.scores = [y for p in parts for y in p.scores]

    def __len__(self) -> int:
        return len(self.scores)

    def __getitem__(self, i: int) -> tuple[str, str, float]:
        return self.sentences1[i], self.sentences2[i], self.scores[i]


def collate_scored_pairs(rows: Sequence[tuple[str, str, float]]) -> dict[str, list[str] | torch.Tensor]:
    """Raw strings + float32 scores: the LightningModule tokenizes, because the encoder owns its tokenizer."""
    return {"sentences1": [r[0] for r in rows], "sentences2": [r[1] for r in rows],
            "scores": torch.tensor([r[2] for r in rows], dtype=torch.float32)}


class ScoredPairsDataModule(ResumableDataModule):
    """Batches ``{"sentences1", "sentences2", "scores"}``, scores in [0, 1] (``score_scale``: your files' range)."""

    data_unit = "scored pairs"

    def __init__(self, data_dir: str | None = None, sources: Sequence[str] | str = ("stsb:train",),
                 batch_size: int = 16, num_workers: int = 0, seed: int = 0, shuffle: bool = True,
                 drop_last: bool = False, max_malformed_fraction: float = 0.01,
                 columns: Mapping[str, str] | None = None, score_scale: Sequence[float] | None = None,
                 mixture: str | None = None, mixture_weights: Sequence[float] | None = None,
                 no_duplicates: bool = False):
        super().__init__()
        self.data_dir = data_dir
        self.sources = [sources] if isinstance(sources, str) else [str(s) for s in sources]
        check_sources(self.sources)
        self.mix = check_mixture(self.sources, mixture, mixture_weights, no_duplicates)
        self.columns, self.score_scale = check_roles(columns, ("scored",)), check_score_scale(score_scale)
        if not 0.0 <= float(max_malformed_fraction) < 1.0:
            raise ConfigError(f"data.max_malformed_fraction must be in [0, 1), got {max_malformed_fraction}")
        self.batch_size, self.num_workers, self.seed = int(batch_size), int(num_workers), int(seed)
        self.shuffle, self.drop_last, self.max_bad = bool(shuffle), bool(drop_last), float(max_malformed_fraction)
        self.dataset: ScoredPairDataset | None = None
        self.parts: dict[str, ScoredPairs] = {}
        self.source_rows: dict[str, int] = {}  # training rows per source (mixture) or of the pooled set

    def setup(self, stage: str | None = None) -> None:
        per_device_batch_size(self.batch_size, self.world_size)  # a bad batch size fails here, before loading
        if self.dataset is None:
            self.parts = {spec: load_scored_source(spec, self.data_dir, self.max_bad, self.columns, self.score_scale)
                          for spec in self.sources}
            self.dataset = ScoredPairDataset(list(self.parts.values()))
            log.info("scored training pairs: %d from %s", len(self.dataset),
                     ", ".join(f"{k} ({len(v)})" for k, v in self.parts.items()))
            if self.mix.rule is None:
                self.source_rows = {"+".join(self.sources): len(self.dataset)}
            else:
                self.source_rows = {k: len(v) for k, v in self.parts.items()}
                check_source_sizes(self.source_rows, self.batch_size)
            if self.mix.batch_sampled:
                log.info("%s", describe_mixture(self))

    def data_facts(self) -> DataFacts:
        """Per-source pair counts and skip reasons for the model card."""
        skipped: Counter = Counter()
        for part in self.parts.values():
            skipped.update(part.skipped)
        return DataFacts(tuple(self.sources), len(self.dataset) if self.dataset is not None else None,
                         self.data_unit, per_source={k: len(v) for k, v in self.parts.items()},
                         skipped=dict(skipped))

    def train_dataloader(self) -> DataLoader:
        sampler = mixture_sampler(self) if self.mix.batch_sampled else None
        return self.resumable_loader(collate_scored_pairs, drop_last=self.drop_last, batch_sampler=sampler)
