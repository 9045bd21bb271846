"""Labelled NLI pairs as training batches ``{"sentences1", "sentences2", "labels"}`` (SBERT-style training).

``format="triplets"``: ``{"anchors", "positives", "negatives"}`` instead (``datamodules.nli_triplets``), the input
of ``model.objective=mnrl``. Sources: ``datamodules.nli_readers`` and your own tables (``datamodules.table_files``).
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
from sts_lightning.datamodules.nli_readers import NLIPairs, _load_hub, load_source
from sts_lightning.datamodules.nli_triplets import (
    ROLES,
    NLITripletDataset,
    NLITriplets,
    build_triplets,
    collate_triplets,
    load_triplet_source,
)
from sts_lightning.datamodules.table_files import check_extension, check_roles, is_file_source
from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.io.model_card import DataFacts

log = logging.getLogger(__name__)


class NLIDataset(Dataset):
    """Map-style (premise, hypothesis, label) rows, so Lightning can shard it with a DistributedSampler."""

    def __init__(self, parts: Sequence[NLIPairs]):
        self.premises = [s for p in parts for s in p.premises]
        self.hypotheses = [s for p in parts for s in p.hypotheses]
        self.labels = [y for p in parts for y in p.labels]

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[str, str, int]:
        return self.premises[i], self.hypotheses[i], self.labels[i]


def collate_nli(rows: Sequence[tuple[str, str, int]]) -> dict[str, list[str] | torch.Tensor]:
    """Raw strings + labels: the LightningModule tokenizes, because the encoder owns its tokenizer."""
    return {"sentences1": [r[0] for r in rows], "sentences2": [r[1] for r in rows],
            "labels": torch.tensor([r[2] for r in rows], dtype=torch.long)}


FORMATS = ("pairs", "triplets")
COLLATE = {"pairs": collate_nli, "triplets": collate_triplets}


class NLIDataModule(ResumableDataModule):
    """Training batches of NLI pairs ``{"sentences1", "sentences2", "labels"}`` (or triplets). ``mixture`` ``null``
    pools the sources, else every batch comes from one; ``no_duplicates`` keeps a text from appearing twice in a batch.
    """

    def __init__(self, data_dir: str | None = None, sources: Sequence[str] | str = ("snli:dev", "snli:test"),
                 batch_size: int = 64, num_workers: int = 0, seed: int = 0, shuffle: bool = True,
                 drop_last: bool = False, max_malformed_fraction: float = 0.01, format: str = "pairs",
                 columns: Mapping[str, str] | None = None, mixture: str | None = None,
                 mixture_weights: Sequence[float] | None = None, no_duplicates: bool = False):
        super().__init__()
        if format not in FORMATS:
            raise unknown_choice("NLI data format", format, FORMATS)
        self.format = format
        self.data_dir = data_dir
        self.sources = [sources] if isinstance(sources, str) else [str(s) for s in sources]
        if not self.sources:
            raise ConfigError("NLIDataModule: sources is empty")
        for spec in filter(is_file_source, self.sources):
            check_extension(spec)  # an unsupported file type fails here, before the model loads
        self.columns = check_roles(columns, ROLES)
        self.mix = check_mixture(self.sources, mixture, mixture_weights, no_duplicates)
        self.batch_size, self.num_workers, self.seed = int(batch_size), int(num_workers), int(seed)
        self.shuffle, self.drop_last, self.max_bad = bool(shuffle), bool(drop_last), max_malformed_fraction
        self.dataset: NLIDataset | NLITripletDataset | None = None
        self.parts: dict[str, NLIPairs | NLITriplets] = {}
        self.source_rows: dict[str, int] = {}  # training rows per source (mixture) or of the pooled set

    def prepare_data(self) -> None:
        """Download hub sources once per node; local files are read directly in ``setup``."""
        for spec in self.sources:
            parts = spec.split(":")
            if parts[0] == "hub" and len(parts) == 3:
                _load_hub(parts[1], parts[2])

    def setup(self, stage: str | None = None) -> None:
        per_device_batch_size(self.batch_size, self.world_size)  # a bad batch size fails here, before loading
        if self.dataset is None:
            load = load_triplet_source if self.format == "triplets" else load_source
            self.parts = {spec: load(spec, self.data_dir, self.max_bad, self.columns) for spec in self.sources}
            sources = ", ".join(f"{k} ({len(v)})" for k, v in self.parts.items())
            if self.format == "triplets":
                triplets = self._triplets()
                self.dataset = NLITripletDataset(triplets)
                log.info("NLI training triplets: %d from %s; %d entailment pairs without a contradiction of the "
                         "same premise not used", len(triplets), sources, triplets.without_negative)
            else:
                self.dataset = NLIDataset(list(self.parts.values()))
                self.source_rows = {k: len(v) for k, v in self.parts.items()}
                log.info("NLI training pairs: %d from %s", len(self.dataset), sources)
            if self.mix.rule is None:  # one pooled set
                self.source_rows = {"+".join(self.sources): len(self.dataset)}
            else:
                check_source_sizes(self.source_rows, self.batch_size)
            if self.mix.batch_sampled:
                log.info("%s", describe_mixture(self))

    def _triplets(self) -> NLITriplets:
        """Pooled: the pair sources built together, then triplet files; mixed: one set per source, in order."""
        if self.mix.rule is None:
            pairs = [p for p in self.parts.values() if isinstance(p, NLIPairs)]
            read = [p for p in self.parts.values() if isinstance(p, NLITriplets)]
            return NLITriplets.concat(([build_triplets(pairs)] if pairs else []) + read)
        own = {k: v if isinstance(v, NLITriplets) else build_triplets([v]) for k, v in self.parts.items()}
        self.source_rows = {k: len(v) for k, v in own.items()}
        return NLITriplets.concat(list(own.values()))

    def data_facts(self) -> DataFacts:
        """Per-source pair counts and skip reasons (malformed rows, pairs without a gold label) for the model card."""
        skipped: Counter = Counter()
        for part in self.parts.values():
            skipped.update(part.skipped)
            skipped["no gold label"] += part.unlabeled
        unit = "NLI triplets" if self.format == "triplets" else "NLI pairs"
        return DataFacts(tuple(self.sources), len(self.dataset) if self.dataset is not None else None, unit,
                         per_source={k: len(v) for k, v in self.parts.items()}, source_unit="labelled NLI pairs",
                         skipped=dict(skipped))

    def train_dataloader(self) -> DataLoader:
        sampler = mixture_sampler(self) if self.mix.batch_sampled else None
        return self.resumable_loader(COLLATE[self.format], drop_last=self.drop_last, batch_sampler=sampler)
