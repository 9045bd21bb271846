"""The scorer interface: sentences -> representation (a dict of tensors indexed by sentence), two representations
-> similarity. Every method ends in a ``Scorer``; evaluation, the training callback and export speak only to it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch

from sts_lightning.embeddings.encoders.base import validate_sentences
from sts_lightning.embeddings.scoring.similarity import cosine_rows

Representation = dict[str, torch.Tensor]


def take(rep: Representation, rows: torch.Tensor) -> Representation:
    """Select sentences (rows) from every tensor of a representation."""
    return {k: v[rows] for k, v in rep.items()}


class Scorer(ABC):
    """Turns sentences into representations and pairs of representations into similarities."""

    name: str = "scorer"

    @abstractmethod
    def represent(self, sentences: Sequence[str]) -> Representation:
        """One row per input sentence, in input order."""

    @abstractmethod
    def similarity(self, a: Representation, b: Representation) -> torch.Tensor:
        """Row-wise similarity of aligned representations: higher means more similar."""

    def score_pairs(self, sentences1: Sequence[str], sentences2: Sequence[str]) -> torch.Tensor:
        """Similarity of each (sentences1[i], sentences2[i]); every distinct sentence is encoded once."""
        rep, rows1, rows2 = self.represent_pairs(sentences1, sentences2)
        return self.similarity(take(rep, rows1), take(rep, rows2)).float()

    def represent_pairs(self, sentences1: Sequence[str],
                        sentences2: Sequence[str]) -> tuple[Representation, torch.Tensor, torch.Tensor]:
        """The representation of the distinct sentences of the pairs, and each pair's two rows in it (for callers that
        need the vectors too, from the one pass ``score_pairs`` makes)."""
        if len(sentences1) != len(sentences2):
            raise ValueError(f"pair lists differ in length: {len(sentences1)} vs {len(sentences2)}")
        validate_sentences(sentences1, "sentences1")
        validate_sentences(sentences2, "sentences2")
        unique = list(dict.fromkeys([*sentences1, *sentences2]))
        index = {s: i for i, s in enumerate(unique)}
        rep = self.represent(unique)
        rows1 = torch.tensor([index[s] for s in sentences1], dtype=torch.long)
        rows2 = torch.tensor([index[s] for s in sentences2], dtype=torch.long)
        return rep, rows1, rows2


class VectorScorer(Scorer):
    """Scorers whose representation is one vector per sentence, compared by cosine."""

    def similarity(self, a: Representation, b: Representation) -> torch.Tensor:
        return cosine_rows(a["embedding"], b["embedding"])


class PairScorer(Scorer):
    """Scores each pair jointly (a model that reads both sentences at once, e.g. a cross-encoder).

    Why a kind of its own: no sentence has a representation apart from its partner, so callers that split work (the
    STS callback under DDP) shard and gather *pairs* and their scores, never sentences and vectors; ``represent`` /
    ``similarity`` refuse instead of returning something that is not what was scored.
    """

    @abstractmethod
    def score_pairs(self, sentences1: Sequence[str], sentences2: Sequence[str]) -> torch.Tensor:
        """``(n,)`` scores of the pairs ``(sentences1[i], sentences2[i])``, higher means more similar."""

    def represent(self, sentences: Sequence[str]) -> Representation:
        raise TypeError(f"scorer {self.name!r} scores pairs jointly: a sentence has no representation of its own "
                        "(use score_pairs / SentenceModel.similarity)")

    def similarity(self, a: Representation, b: Representation) -> torch.Tensor:
        raise TypeError(f"scorer {self.name!r} scores pairs jointly: use score_pairs(sentences1, sentences2)")
