"""A frozen encoder's STS reading, computed once across the evaluations of a run.

Why: a ``ReadingScorer`` whose encoder has no trainable weight would encode the same sentences at every evaluation;
kept in memory, later ones run only the trained head. Keyed by the weights' SHA-256: changed weights encode again.
"""

from __future__ import annotations

import torch

from sts_lightning.embeddings.scoring.protocols import ReadingScorer
from sts_lightning.embeddings.scoring.reading_cache import weights_sha256
from sts_lightning.embeddings.scoring.reading_store import ReadingStore
from sts_lightning.embeddings.scoring.scorer import Representation, Scorer
from sts_lightning.embeddings.scoring.shared_pass import share_forward_pass


class FrozenReadings:
    """``represent(scorer, shard, batch_size)``: ``scorer.represent(shard)``, a frozen encoder's reading kept."""

    def __init__(self) -> None:
        self._stores: dict[int, tuple[object, str, ReadingStore]] = {}  # id(encoder) -> (encoder, digest, store)

    def represent(self, scorer: Scorer, shard: list[str], batch_size: int | None) -> Representation:
        model = getattr(getattr(scorer, "encoder", None), "model", None)
        if not isinstance(scorer, ReadingScorer) or not isinstance(model, torch.nn.Module) \
                or any(p.requires_grad for p in model.parameters()):
            return scorer.represent(shard)
        digest = weights_sha256(model)
        _, known, store = self._stores.get(id(scorer.encoder), (None, None, None))
        if known != digest or store is None or store.encoder is not scorer.encoder:
            store = ReadingStore(scorer.encoder)
            self._stores[id(scorer.encoder)] = (scorer.encoder, digest, store)
        return share_forward_pass(scorer.encoder, [scorer], shard, batch_size, store)[0].represent(shard)
