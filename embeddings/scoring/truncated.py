"""A vector scorer read at fewer dimensions: the first ``dim`` numbers of each vector, compared by cosine
(Matryoshka models; as sentence-transformers' ``truncate_dim``). Other representations raise ``UnsupportedError``."""

from __future__ import annotations

from collections.abc import Sequence

from sts_lightning.embeddings.errors import UnsupportedError
from sts_lightning.embeddings.scoring.dims_option import check_dims
from sts_lightning.embeddings.scoring.mteb_adapter import scores_by_cosine
from sts_lightning.embeddings.scoring.scorer import Representation, Scorer, VectorScorer

__all__ = ["TruncatedScorer", "check_dims", "truncate"]


class TruncatedScorer(VectorScorer):
    """``inner``'s vectors cut to their first ``dim`` numbers (cosine, as ``VectorScorer``)."""

    def __init__(self, inner: Scorer, dim: int) -> None:
        self.inner, self.dim = inner, int(dim)
        self.name = f"{inner.name}@{self.dim}"

    def represent(self, sentences: Sequence[str]) -> Representation:
        return {"embedding": self.inner.represent(sentences)["embedding"][:, :self.dim]}


def truncate(scorer: Scorer, dim: int, probe: str = "a") -> TruncatedScorer:
    """``scorer`` at ``dim`` dimensions; ``UnsupportedError`` when it is no cosine of one vector or has fewer than
    ``dim`` numbers (read from one ``probe`` sentence: a served scorer answers it from its stored vectors)."""
    if not scores_by_cosine(scorer):
        raise UnsupportedError(f"dims: {scorer.name} does not compare one vector by cosine, it cannot be truncated")
    width = scorer.represent([probe])["embedding"].shape[-1]
    if dim > width:
        raise UnsupportedError(f"dims: {dim} is larger than {scorer.name}'s {width}-d vectors")
    return TruncatedScorer(scorer, dim)
