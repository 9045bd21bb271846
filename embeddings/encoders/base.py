"""Encoders turn sentences into all-layer token states (``TokenBatch``).

``BaseEncoder.encode`` is the one batching loop (de-duplicate, sort by length, batch by token budget or count, pool,
restore order); concrete encoders only tokenize and run one batch, so HF models and GloVe share the scorers.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence

import torch

from sts_lightning.embeddings.console import progress
from sts_lightning.embeddings.encoders.prefetch import tokenized_chunks
from sts_lightning.embeddings.encoders.token_batch import TokenBatch
from sts_lightning.embeddings.encoders.token_budget import default_max_tokens, plan_batches
from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.stop_request import check_stop

Pooled = torch.Tensor | dict[str, torch.Tensor]
PoolFn = Callable[[TokenBatch], Pooled]

PROGRESS_MIN_SENTENCES = 2000  # below this a progress bar is noise


def validate_sentences(sentences: Sequence[str], source: str = "input") -> None:
    """Reject non-strings and empty sentences with the index that is wrong (an empty one hides a data bug)."""
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
    # Sentences per forward pass when set; ``None``: batches by ``max_tokens`` (None: the device's measured default).
    batch_size: int | None = 64
    max_tokens: int | None = None
    device: torch.device = torch.device("cpu")
    # Sentences this encoder ran a forward pass on (``encode``, or a wrapper calling ``forward_ids``): what
    # ``evaluate.py`` reports, so "no forward pass" (a warm embedding cache) is shown, not assumed.
    sentences_encoded: int = 0

    def count_forward(self, n: int) -> None:
        """Add ``n`` sentences to ``sentences_encoded`` (``layer_memo`` counts its inner encoder's passes instead)."""
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

    @property
    def packs_batches(self) -> bool:
        """Whether ``forward_ids`` packs (padding-free): a token budget then counts real tokens, not padded area."""
        return False

    def token_budget(self, batch_size: int | None = None) -> int | None:
        """Tokens per pass: ``None`` when a sentence count is set (it wins), else ``max_tokens`` or the default."""
        return None if (batch_size or self.batch_size) else (self.max_tokens or default_max_tokens(self.device))

    def batch_plan(self, lengths: Sequence[int], batch_size: int | None = None) -> list[tuple[int, int]]:
        """The forward passes over ``lengths`` (longest first): an explicit sentence count wins, else the budget."""
        return plan_batches(lengths, batch_size or self.batch_size, self.token_budget(batch_size),
                            padded=not self.packs_batches)

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
        ids: Sequence[Sequence[int]] | None = None,
    ) -> Pooled:
        """Pool every sentence with ``pool`` (``TokenBatch`` -> ``(batch, dim)`` or a dict of such); rows follow
        ``sentences``, duplicates share one pass. ``ids``, when given, must be exactly ``tokenize(sentences)``."""
        validate_sentences(sentences)
        if len(sentences) == 0:
            raise DataError("nothing to encode: the sentence list is empty")
        unique = list(dict.fromkeys(sentences))
        index_of = {s: i for i, s in enumerate(unique)}
        if show_progress is None:
            show_progress = len(unique) >= PROGRESS_MIN_SENTENCES
        order: list[int] = []  # the unique sentences in the order their batches run
        known = None if ids is None else dict(zip(sentences, ids, strict=True))
        batches, total = self._batches(unique, batch_size, order, None if known is None else [known[s] for s in unique])
        chunks: list[Pooled] = []
        self.count_forward(len(unique))
        with torch.inference_mode():
            for ids in progress(batches, desc=desc, total=total, disable=not show_progress, unit="batch"):
                check_stop()  # a SIGTERM / SIGUSR1 stops a long encoding within a batch (embeddings/stop_request.py)
                chunks.append(pool(self.forward_ids(ids)))
        inverse = torch.empty(len(unique), dtype=torch.long)
        inverse[torch.tensor(order, dtype=torch.long)] = torch.arange(len(unique))
        rows = torch.tensor([index_of[s] for s in sentences], dtype=torch.long)
        gather = inverse[rows]
        return _concat_and_take(chunks, gather)

    def _batches(self, unique: list[str], batch_size: int | None, order: list[int],
                 ids: list | None = None) -> tuple[Iterator[list[list[int]]], int | None]:
        """The token ids of each forward pass (each chunk sorted longest first, cut by ``batch_plan``; ``order``
        receives the sentence indices), and how many passes (``None`` until every chunk is tokenized)."""
        chunks = tokenized_chunks(self, unique) if ids is None else [(0, ids)]

        def plan(offset: int, ids: list[list[int]]) -> Iterator[list[list[int]]]:
            local = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
            order.extend(offset + i for i in local)
            for start, stop in self.batch_plan([len(ids[i]) for i in local], batch_size):
                yield [ids[i] for i in local[start:stop]]

        if len(chunks) == 1:  # known up front: an exact progress total
            offset, ids = next(iter(chunks))
            passes = list(plan(offset, ids))
            return iter(passes), len(passes)
        return (batch for offset, ids in chunks for batch in plan(offset, ids)), None


def _concat_and_take(chunks: list[Pooled], rows: torch.Tensor) -> Pooled:
    if isinstance(chunks[0], dict):
        return {k: torch.cat([c[k] for c in chunks])[rows].float().cpu() for k in chunks[0]}  # type: ignore[index]
    return torch.cat(chunks)[rows].float().cpu()  # type: ignore[arg-type]
