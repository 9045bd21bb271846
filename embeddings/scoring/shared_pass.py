"""Run several pooling-type scorers off ONE forward pass of their shared encoder.

Why: CLS, mean, max, first-last, last-2 and SBERT-WK all read the same ``TokenBatch``; encoding the
evaluation sentences once instead of six times makes a comparison table ~6x cheaper. A scorer
qualifies when it is a ``PooledScorer`` (``embeddings.scoring.protocols``: ``encoder`` + ``pool(TokenBatch)``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.scoring.protocols import PooledScorer
from sts_lightning.embeddings.scoring.scorer import Representation, Scorer


class PrecomputedScorer(Scorer):
    """A scorer whose representations were computed ahead for a known sentence set."""

    def __init__(self, inner: Scorer, sentences: Sequence[str], rep: Representation) -> None:
        self.inner = inner
        self.name = inner.name
        self.rep = rep
        self.row_of = {s: i for i, s in enumerate(sentences)}

    def represent(self, sentences: Sequence[str]) -> Representation:
        missing = [s for s in sentences if s not in self.row_of]
        if missing:
            # Outside the precomputed set: fall back to the real scorer rather than fail.
            return self.inner.represent(sentences)
        rows = torch.tensor([self.row_of[s] for s in sentences], dtype=torch.long)
        return {k: v[rows] for k, v in self.rep.items()}

    def similarity(self, a: Representation, b: Representation) -> torch.Tensor:
        return self.inner.similarity(a, b)


def share_forward_pass(encoder: BaseEncoder, scorers: Sequence[Scorer], sentences: Sequence[str],
                       batch_size: int | None = None) -> list[Scorer]:
    """Precompute every pool-type scorer on ``sentences`` in one encode; others pass through."""
    pooled = [s for s in scorers if isinstance(s, PooledScorer) and s.encoder is encoder]
    if len(pooled) < 2:
        return list(scorers)
    unique = list(dict.fromkeys(sentences))

    def pool_all(batch):
        return {str(i): s.pool(batch) for i, s in enumerate(pooled)}

    table = encoder.encode(unique, pool_all, batch_size=batch_size, desc=f"{encoder.name}: {len(pooled)} poolings")
    done = {id(s): PrecomputedScorer(s, unique, {"embedding": table[str(i)]}) for i, s in enumerate(pooled)}
    return [done.get(id(s), s) for s in scorers]
