"""Contrastive Tension (Carlsson et al., ICLR 2021): pair sampling, view halving and losses, on tensors.

* ``objective=bce`` (the paper): :func:`make_ct_pairs` (seeded by :func:`pair_rng`), :func:`ct_logits`,
  :func:`ct_loss`. Every row is a self-contained pair, so under DDP each rank's loss needs no gather.
* ``objective=in_batch`` (the CT authors' variant): :func:`in_batch_tension_loss`.
* ``views=halves`` / ``mixed_halves`` (ours): :func:`split_views` cuts each sentence in two.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from sts_lightning.embeddings.methods.shared.in_batch import multiple_negatives_ranking_loss
from sts_lightning.embeddings.methods.shared.precision import in_fp32

__all__ = [
    "ct_batch_labels",
    "ct_logits",
    "ct_loss",
    "in_batch_tension_loss",
    "make_ct_pairs",
    "pair_rng",
    "per_label_losses",
    "split_views",
]


@in_fp32
def ct_logits(emb1: Tensor, emb2: Tensor) -> Tensor:
    """``(batch,)`` plain dot products ``f1(s1)^T f2(s2)`` of ``(batch, d)`` embeddings, as the reference's
    ``compareSents`` (no cosine, no temperature)."""
    if emb1.shape != emb2.shape:
        raise ValueError(f"emb1 and emb2 must have the same shape, got {tuple(emb1.shape)} and {tuple(emb2.shape)}")
    return (emb1 * emb2).sum(dim=-1)


@in_fp32
def ct_loss(logits: Tensor, labels: Tensor, reduction: str = "mean") -> Tensor:
    """BCE with logits (identical pairs -> 1), ``"mean"`` as the reference code (sentence-transformers' sums), in
    float32 or better: the logits are unbounded dot products."""
    return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype), reduction=reduction)


def in_batch_tension_loss(emb1: Tensor, emb2: Tensor, scale: float = 20.0, gather: bool = True) -> Tensor:
    """Symmetric in-batch CT: ``(CE(S) + CE(S^T)) / 2`` over ``S = cos(emb1, emb2) x scale``; row ``i`` targets column ``i``."""
    if emb1.shape != emb2.shape:
        raise ValueError(f"emb1 and emb2 differ in shape: {tuple(emb1.shape)} vs {tuple(emb2.shape)}")
    return (multiple_negatives_ranking_loss(emb1, emb2, scale=scale, gather=gather)
            + multiple_negatives_ranking_loss(emb2, emb1, scale=scale, gather=gather)) / 2


def _group_size(batch_size: int, positives: int) -> int:
    if positives < 1 or batch_size < 2 or batch_size % positives or batch_size // positives < 2:
        raise ValueError(
            f"batch_size={batch_size} must split into `positives`={positives} groups of one positive "
            "and at least one negative pair"
        )
    return batch_size // positives


def per_label_losses(logits: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Mean BCE of the identical and of the different pairs; masked sums, since boolean indexing syncs the GPU."""
    per_pair = ct_loss(logits, labels, reduction="none")
    positive = labels.to(per_pair.dtype)
    negative = 1.0 - positive
    return (per_pair * positive).sum() / positive.sum(), (per_pair * negative).sum() / negative.sum()


def ct_batch_labels(batch_size: int = 16, positives: int = 2) -> Tensor:
    """``(batch_size,)`` 0/1 labels: ``positives`` groups, each one positive followed by its negatives (the paper's
    16 and 2: ``[1, 0 x 7, 1, 0 x 7]``)."""
    group = _group_size(batch_size, positives)
    labels = torch.zeros(batch_size)
    labels[::group] = 1.0
    return labels


def pair_rng(seed: int, rank: int, step: int) -> np.random.Generator:
    """One rank's pair generator at one optimizer step: a pure function, so a resumed run draws the same pairs."""
    return np.random.default_rng([int(seed), int(rank), int(step)])


def make_ct_pairs(
    sentences: Sequence[str], rng: np.random.Generator, batch_size: int = 16, positives: int = 2
) -> tuple[list[str], list[str], Tensor]:
    """One CT batch ``(texts1, texts2, labels)`` drawn as the reference's ``generateTrainingSamples``, except that a
    negative row whose two sides are the same sentence is redrawn (else its target contradicts)."""
    group = _group_size(batch_size, positives)
    k = group - 1
    n = len(sentences)
    if n == 0:
        raise ValueError("Contrastive Tension needs at least two distinct sentences to form negative pairs")
    pos = rng.integers(0, n, size=positives)
    neg = rng.integers(0, n, size=positives * 2 * k)
    texts1: list[str] = []
    texts2: list[str] = []
    for g in range(positives):
        block = neg[g * 2 * k:(g + 1) * 2 * k]
        side1 = [sentences[i] for i in block[:k]]
        side2 = [sentences[i] for i in block[k:]]
        for j in range(k):
            tries = 0
            while side2[j] == side1[j]:
                tries += 1  # the O(n) scan runs only in the pathological case, never per batch
                if tries == 100 and all(s == side1[j] for s in sentences):
                    raise ValueError(
                        "Contrastive Tension needs at least two distinct sentences to form negative pairs"
                    )
                side2[j] = sentences[rng.integers(0, n)]
        p = sentences[pos[g]]
        texts1 += [p, *side1]
        texts2 += [p, *side2]
    return texts1, texts2, ct_batch_labels(batch_size, positives)


def split_views(texts1: Sequence[str], texts2: Sequence[str], rng: np.random.Generator,
                mixed: bool = False, span_words: int | None = None) -> tuple[list[str], list[str]]:
    """Model 1 sees the LEFT part of each text, model 2 the RIGHT part, cut at a word boundary in its middle third
    (``views=halves``, ours): with identical positives a random encoder solves CT by lexical identity
    (docs/dev/scratch-learning-signal.md). ``mixed``: a coin flip per sentence picks the sides; ``span_words=k``: each
    side keeps ``[min(3, side), min(k, side)]`` words next to the cut, so positives cannot be matched by length.
    """
    cuts = {text: _cut(text, rng, span_words) for text in dict.fromkeys([*texts1, *texts2])}  # one cut per sentence
    if mixed:
        cuts = {text: sides[::-1] if rng.random() < 0.5 else sides for text, sides in cuts.items()}
    return [cuts[t][0] for t in texts1], [cuts[t][1] for t in texts2]


def _cut(text: str, rng: np.random.Generator, span_words: int | None = None) -> tuple[str, str]:
    words = text.split()
    if len(words) < 2:
        return text, text
    low = max(1, len(words) // 3)
    high = min(len(words) - 1, len(words) - len(words) // 3)
    at = int(rng.integers(low, high + 1))
    left, right = words[:at], words[at:]
    if span_words is not None:
        left = left[len(left) - _span_length(len(left), span_words, rng):]
        right = right[:_span_length(len(right), span_words, rng)]
    return " ".join(left), " ".join(right)


def _span_length(side: int, span_words: int, rng: np.random.Generator) -> int:
    high = min(span_words, side)
    return int(rng.integers(min(3, high), high + 1))
