"""Which unlabelled pairs AugSBERT's cross-encoder labels: the in-domain "silver" pairs (Thakur et al., NAACL 2021).

The candidates pair the unique sentences of the gold pairs with each other, ``top_k`` partners per sentence:

- ``random``: partners drawn uniformly (seeded), never the sentence itself (the paper's random sampling);
- ``semantic``: the ``top_k`` nearest other sentences by cosine of a bi-encoder's vectors, as the authors'
  sentence-transformers example samples them (``semantic_search`` with ``top_k + 1`` hits, the sentence itself skipped).

Either way a pair that is already gold, or already sampled, in either order, is dropped, as the example does: the
cross-encoder's label of a gold pair would only repeat (worse) what the bi-encoder already sees, and a pair sampled
from both ends would weigh twice. Pure functions on indices into the unique sentences; the DataModule does the I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch

STRATEGIES = ("semantic", "random")  # BM25, the paper's third strategy, needs an index: not built here


def unique_sentences(sentences1: Sequence[str], sentences2: Sequence[str]) -> list[str]:
    """Every sentence of the gold pairs once, in order of first appearance: a fixed order, so one seed gives one
    sample (the example's ``list(set(...))`` changes with Python's string hashing)."""
    return list(dict.fromkeys(s for pair in zip(sentences1, sentences2, strict=True) for s in pair))


def pair_key(i: int, j: int) -> tuple[int, int]:
    """A pair named without its order: the dropped pairs are dropped in either order."""
    return (i, j) if i <= j else (j, i)


def gold_pair_keys(sentences1: Sequence[str], sentences2: Sequence[str], sentences: Sequence[str]) -> set[tuple[int, int]]:
    """The gold pairs as unordered index pairs into ``sentences`` (which must hold every gold sentence)."""
    index = {s: i for i, s in enumerate(sentences)}
    return {pair_key(index[a], index[b]) for a, b in zip(sentences1, sentences2, strict=True)}


def random_partners(n: int, top_k: int, seed: int) -> np.ndarray:
    """``(n, min(top_k, n - 1))`` partner indices: row ``i`` holds distinct partners drawn uniformly from the other
    ``n - 1`` sentences. O(n * top_k): a rejection draw where ``top_k`` is small against ``n``, else a permutation."""
    k = max(min(int(top_k), n - 1), 0)
    rng = np.random.default_rng(int(seed))
    if k == 0:
        return np.zeros((n, 0), dtype=np.int64)
    if 4 * k > n - 1:  # few sentences: a permutation per row is cheap, and rejection would redraw often
        draws = np.stack([rng.permutation(n - 1)[:k] for _ in range(n)])
    else:
        draws = rng.integers(0, n - 1, size=(n, k))
        while True:  # redraw the rows that name one partner twice (each row's chance is at most ~k^2 / 2n)
            ordered = np.sort(draws, axis=1)
            bad = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
            if not bad.size:
                break
            draws[bad] = rng.integers(0, n - 1, size=(bad.size, k))
    rows = np.arange(n)[:, None]
    return draws + (draws >= rows)  # draws index the others: skip the sentence itself


def semantic_partners(vectors: torch.Tensor, top_k: int, chunk: int = 1024) -> list[list[int]]:
    """Row ``i``: the ``top_k`` other sentences nearest to sentence ``i`` by cosine, nearest first.

    ``top_k + 1`` hits are taken and the sentence itself skipped, as in the authors' example; where the sentence is
    not among its own hits (a tie with an identical vector) the first ``top_k`` others are kept, never ``top_k + 1``.
    Queries go ``chunk`` rows at a time, so memory is ``chunk x n``, not ``n x n``."""
    x = torch.nn.functional.normalize(torch.as_tensor(vectors).detach().float().cpu(), dim=1)
    n, k = x.shape[0], int(top_k)
    out: list[list[int]] = []
    for start in range(0, n, chunk):
        hits = torch.topk(x[start:start + chunk] @ x.T, min(k + 1, n), dim=1).indices.tolist()
        out.extend([j for j in row if j != start + r][:k] for r, row in enumerate(hits))
    return out


def new_pairs(partners: Iterable[Iterable[int]], gold: set[tuple[int, int]]) -> list[tuple[int, int]]:
    """``(i, j)`` for each sentence ``i`` and each of its partners ``j`` in order, without self pairs, gold pairs
    and pairs already taken (both in either order): the silver pairs to label."""
    seen = set(gold)
    out = []
    for i, row in enumerate(partners):
        for j in map(int, row):
            key = pair_key(i, j)
            if i != j and key not in seen:
                seen.add(key)
                out.append((i, j))
    return out
