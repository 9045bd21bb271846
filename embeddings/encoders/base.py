"""Encoders turn sentences into all-layer token states (``TokenBatch``).

``BaseEncoder.encode`` is the one batching loop of the project: it validates, de-duplicates, sorts by
token length (so padding is minimal), batches, runs a pooling function on each ``TokenBatch`` under
``torch.inference_mode`` and returns results in the caller's order. Concrete encoders only say how
to tokenize and how to run one padded batch, so a Hugging Face model, GloVe vectors, or a C engine
all plug into the same scorers.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence

import torch

from sts_lightning.embeddings.console import progress
from sts_lightning.embeddings.encoders.token_batch import TokenBatch
from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.stop_request import check_stop

Pooled = torch.Tensor | dict[str, torch.Tensor]
PoolFn = Callable[[TokenBatch], Pooled]

PROGRESS_MIN_SENTENCES = 2000  # below this a progress bar is noise


def validate_sentences(sentences: Sequence[str], source: str = "input") -> None:
    """Reject non-strings and empty sentences with the index that is wrong.

    Why: an empty string encodes to just [CLS][SEP]; silently scoring it hides a data bug.
    """
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise DataError(f"{source}: sentence {i} is {type(s).__name__}, not a string: {s!r}")
        if not s.strip():
            raise DataError(f"{source}: sentence {i} is empty")


def pad_ids(ids: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token-id lists to the longest of the batch (dynamic padding) -> (ids, mask)."""
    width = max(len(x) for x in ids)
    padded = torch.full((len(ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for row, seq in enumerate(ids):
        padded[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    return padded, mask


class BaseEncoder(ABC):
    """Shared encode loop; subclasses implement ``tokenize`` and ``forward_ids``."""

    name: str = "encoder"
    batch_size: int = 64
    device: torch.device = torch.device("cpu")
    # Sentences this encoder ran a forward pass on (``encode``, or a wrapper calling ``forward_ids``): what
    # ``evaluate.py`` reports, so "no forward pass" (a warm embedding cache) is shown, not assumed.
    sentences_encoded: int = 0

    def count_forward(self, n: int) -> None:
        """Add ``n`` sentences to ``sentences_encoded``; a wrapper that serves from memory counts its inner
        encoder's passes instead (``embeddings.encoders.layer_memo``)."""
        self.sentences_encoded += int(n)

    @property
    @abstractmethod
    def hidden_size(self) -> int: ...

    @property
    @abstractmethod
    def num_layers(self) -> int:
        """Number of hidden-state tensors a ``TokenBatch`` carries (embeddings included)."""

    @abstractmethod
    def tokenize(self, sentences: Sequence[str]) -> list[list[int]]:
        """Token ids per sentence, truncated, special tokens included, no padding."""

    @abstractmethod
    def forward_ids(self, ids: Sequence[Sequence[int]]) -> TokenBatch:
        """Run one batch of token-id lists (padded here) and return all-layer states."""

    @contextlib.contextmanager
    def stochastic(self) -> Iterator[None]:
        """Context in which forward passes are random (MC dropout). Default: no randomness."""
        yield

    def encode(
        self,
        sentences: Sequence[str],
        pool: PoolFn,
        batch_size: int | None = None,
        show_progress: bool | None = None,
        desc: str = "encoding",
    ) -> Pooled:
        """Pool every sentence with ``pool``; rows follow ``sentences`` (duplicates share one pass).

        Args:
            sentences: non-empty strings.
            pool: maps a ``TokenBatch`` to ``(batch, dim)`` or a dict of such tensors.
            batch_size: sentences per forward pass (default: the encoder's).
            show_progress: progress bar; default on for >= 2000 unique sentences.
            desc: progress-bar label.
        """
        validate_sentences(sentences)
        if len(sentences) == 0:
            raise DataError("nothing to encode: the sentence list is empty")
        unique = list(dict.fromkeys(sentences))
        index_of = {s: i for i, s in enumerate(unique)}
        ids = self.tokenize(unique)
        order = sorted(range(len(unique)), key=lambda i: -len(ids[i]))
        bs = batch_size or self.batch_size
        if show_progress is None:
            show_progress = len(unique) >= PROGRESS_MIN_SENTENCES
        chunks: list[Pooled] = []
        self.count_forward(len(unique))
        with torch.inference_mode():
            for start in progress(range(0, len(order), bs), desc=desc, disable=not show_progress, unit="batch"):
                check_stop()  # a SIGTERM / SIGUSR1 stops a long encoding within a batch (embeddings/stop_request.py)
                batch = self.forward_ids([ids[i] for i in order[start : start + bs]])
                chunks.append(pool(batch))
        inverse = torch.empty(len(unique), dtype=torch.long)
        inverse[torch.tensor(order, dtype=torch.long)] = torch.arange(len(unique))
        rows = torch.tensor([index_of[s] for s in sentences], dtype=torch.long)
        gather = inverse[rows]
        return _concat_and_take(chunks, gather)


def _concat_and_take(chunks: list[Pooled], rows: torch.Tensor) -> Pooled:
    if isinstance(chunks[0], dict):
        return {k: torch.cat([c[k] for c in chunks])[rows].float().cpu() for k in chunks[0]}  # type: ignore[index]
    return torch.cat(chunks)[rows].float().cpu()  # type: ignore[arg-type]
