"""Run every scorer of one encoder off ONE forward pass: each reading (``embeddings.scoring.reading``) once.

A ``ReadingScorer`` of this encoder with the pass's batch size is served from the store; one with
``use_readings(store)`` (Sen2Pro) gets it; everything else passes through."""

from __future__ import annotations

from collections.abc import Sequence

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.scoring.protocols import ReadingScorer
from sts_lightning.embeddings.scoring.reading import LAYER
from sts_lightning.embeddings.scoring.reading_store import ReadingStore
from sts_lightning.embeddings.scoring.scorer import Representation, Scorer


class PrecomputedScorer(Scorer):
    """A ``ReadingScorer`` served from a ``ReadingStore``: its post-processing applied to the stored reading."""

    def __init__(self, inner: Scorer, store: ReadingStore) -> None:
        self.inner, self.store = inner, store
        self.reading = inner.reading()
        self.name = inner.name

    def represent(self, sentences: Sequence[str]) -> Representation:
        if self.reading.kind == LAYER:
            return self.inner.from_layer(self.store.layer_view(self.reading), sentences)
        if not self.store.knows(self.reading, sentences):
            return self.inner.represent(sentences)
        return self.inner.from_pooled(self.store.pooled(self.reading, sentences))

    def similarity(self, a: Representation, b: Representation) -> Representation:
        return self.inner.similarity(a, b)


def readers_of(encoder: BaseEncoder, scorers: Sequence[Scorer], batch_size: int | None = None) -> list[Scorer]:
    """The scorers the shared pass serves: ``ReadingScorer`` s of ``encoder`` batching as the pass does."""
    size = batch_size or encoder.batch_size
    return [s for s in scorers if isinstance(s, ReadingScorer) and s.encoder is encoder
            and getattr(s, "batch_size", None) in (None, size)]


def share_forward_pass(encoder: BaseEncoder, scorers: Sequence[Scorer], sentences: Sequence[str],
                       batch_size: int | None = None, store: ReadingStore | None = None) -> list[Scorer]:
    """Compute every reading of ``scorers`` on ``sentences`` (in the order ``score_pairs`` sees them, so results equal
    each scorer's own ``represent``) once into ``store`` (default: a new one in memory) and serve them from it."""
    readers = readers_of(encoder, scorers, batch_size)
    users = [s for s in scorers if callable(getattr(s, "use_readings", None)) and getattr(s, "encoder", None) is encoder]
    if not readers and not users:
        return list(scorers)
    store = store if store is not None else ReadingStore(encoder)
    if readers:
        readings = list(dict.fromkeys(s.reading() for s in readers))
        store.fill(readings, sentences, batch_size,
                   desc=f"{encoder.name}: {len(readings)} reading(s) for {len(readers)} scorer(s)")
    for user in users:
        user.use_readings(store)
    done = {id(s): PrecomputedScorer(s, store) for s in readers}
    return [done.get(id(s), s) for s in scorers]
