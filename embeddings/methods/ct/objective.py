"""Contrastive Tension (Carlsson et al., ICLR 2021): its pair sampling, view halving and losses, on tensors.

Keeping the maths here, apart from the LightningModule (``lightning_modules.ct``), lets the tests pin each
objective to the paper, the reference code and sentence-transformers with hand-made tensors.

* ``objective=bce`` (the paper): :func:`make_ct_pairs` samples a batch of text pairs in the reference layout
  (seeded by :func:`pair_rng`), :func:`ct_logits` / :func:`ct_loss` score it. Every row is a self-contained
  pair, so under DDP each rank computes its loss on its own shard with no gather, and DDP's gradient average
  of per-rank means equals the global mean when ranks hold equal batch sizes (the DataModules guarantee that).
* ``objective=in_batch`` (the CT authors' in-batch-negatives variant): :func:`in_batch_tension_loss`, built on
  the gathered in-batch loss of ``embeddings.methods.shared.in_batch``.
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
    """Row-wise dot product of the two CT models' sentence embeddings.

    Carlsson et al. (ICLR 2021), "Semantic Re-tuning with Contrastive Tension": the logit is the plain
    dot product ``f1(s1)^T f2(s2)`` of the two independently updated models (no cosine, no temperature),
    fed to a sigmoid; the reference code's ``compareSents`` is the same ``reduce_sum(emb1 * emb2, -1)``.

    Args:
        emb1: ``(batch, d)`` embeddings of the first text of each pair from model 1.
        emb2: ``(batch, d)`` embeddings of the second text of each pair from model 2.

    Returns:
        ``(batch,)`` logits.
    """
    if emb1.shape != emb2.shape:
        raise ValueError(f"emb1 and emb2 must have the same shape, got {tuple(emb1.shape)} and {tuple(emb2.shape)}")
    return (emb1 * emb2).sum(dim=-1)


@in_fp32
def ct_loss(logits: Tensor, labels: Tensor, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy with logits: identical pairs -> 1, different pairs -> 0 (Carlsson et al. 2021).

    ``reduction="mean"`` matches the reference code (Keras ``BinaryCrossentropy(from_logits=True)``
    averages over the batch); sentence-transformers' ``ContrastiveTensionLoss`` uses ``"sum"``, i.e. a
    16x larger gradient at batch size 16. Computed in float32 or better: the logits are unbounded dot
    products and BCE-with-logits is only stable in the fused form used here.

    Args:
        logits: ``(batch,)`` output of :func:`ct_logits`.
        labels: ``(batch,)`` 0/1 targets, e.g. from :func:`ct_batch_labels`.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """
    return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype), reduction=reduction)


def in_batch_tension_loss(emb1: Tensor, emb2: Tensor, scale: float = 20.0, gather: bool = True) -> Tensor:
    """Symmetric in-batch Contrastive Tension: ``(CE(S) + CE(S^T)) / 2`` over ``S = cos(emb1, emb2) x scale``.

    Row ``i`` of both inputs is the same sentence (model 1 vs model 2), so the target of row ``i`` is
    column ``i``; every other sentence of the global batch is a negative.
    """
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
    """Mean BCE of the identical pairs and of the different pairs (CT logs them as ``train/pos_loss`` / ``neg_loss``).

    Masked sums, not ``loss[labels == 1].mean()``: boolean indexing needs the count on the host, one GPU stream
    sync each, twice a step (issue 39).
    """
    per_pair = ct_loss(logits, labels, reduction="none")
    positive = labels.to(per_pair.dtype)
    negative = 1.0 - positive
    return (per_pair * positive).sum() / positive.sum(), (per_pair * negative).sum() / negative.sum()


def ct_batch_labels(batch_size: int = 16, positives: int = 2) -> Tensor:
    """Labels of one CT batch: ``positives`` groups, each one positive followed by its negatives.

    The paper and its reference code (FreddeFrallan/Contrastive-Tension,
    ``ContrastiveTension/Training.py``) use batch 16 with ``negative_k=7``: ``[1, 0 x 7, 1, 0 x 7]``.
    When the global batch is split across ranks, pass the per-rank size with the per-rank number of
    positives (e.g. 8 and 1 on 2 GPUs) to keep the 1:7 ratio on every rank.

    Returns:
        ``(batch_size,)`` float tensor of 0/1.
    """
    group = _group_size(batch_size, positives)
    labels = torch.zeros(batch_size)
    labels[::group] = 1.0
    return labels


def pair_rng(seed: int, rank: int, step: int) -> np.random.Generator:
    """The generator of one rank's pairs at one optimizer step: a pure function of its arguments.

    Why not a stateful generator: a resumed run (or a rerun) draws exactly the same pairs at the same
    step, and ranks draw independently. With gradient accumulation the micro-batches of one step share
    the draw pattern (their sentence pools differ).
    """
    return np.random.default_rng([int(seed), int(rank), int(step)])


def make_ct_pairs(
    sentences: Sequence[str], rng: np.random.Generator, batch_size: int = 16, positives: int = 2
) -> tuple[list[str], list[str], Tensor]:
    """Sample one CT batch of text pairs in the layout of the reference code.

    As in ``generateTrainingSamples`` / ``_orderBatchSamples`` of the reference code: first the positive
    sentences of all groups are drawn uniformly with replacement, then ``2 * k`` negatives per group
    (``k = batch_size // positives - 1``), also uniformly with replacement. Group ``g`` is
    ``texts1 = [p_g, n_0..n_{k-1}]`` and ``texts2 = [p_g, n_k..n_{2k-1}]`` from that group's slice of
    negatives, so model 1 and model 2 see independent random sentences in the negative rows.

    One deliberate difference: the reference accepts the rare draw where both sides of a negative row are
    the same sentence (still labelled 0, i.e. a contradictory target). We redraw the model-2 side until the
    texts differ, which matters only for small or duplicate-heavy corpora.

    Args:
        sentences: the corpus (any sequence of strings; may contain duplicates).
        rng: numpy Generator; the output is a pure function of its state (seed it per rank and worker).
        batch_size: pairs per batch (16 in the paper).
        positives: identical pairs per batch (2 in the paper).

    Returns:
        ``(texts1, texts2, labels)``: texts for model 1 and model 2, and :func:`ct_batch_labels`.
    """
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
    """Model 1 sees the LEFT part of each of its texts, model 2 the RIGHT part of each of its texts.

    Why (``views=halves``, ours, not in the CT paper): with identical positives a randomly initialised
    encoder solves CT by lexical identity and learns nothing about meaning (docs/dev/scratch-learning-signal.md).
    Positives made of the two halves of one sentence share no tokens, so the copies can only agree by
    learning which words occur together: the distributional signal of the inverse cloze task / DeCLUTR.
    Negatives are halves too, so truncation is no cue (length still is: see ``span_words``). Each text is cut at a word boundary drawn
    uniformly from its middle third (the same cut on both sides of a positive); a text of one word is kept whole on both sides.

    ``mixed=True`` (``views=mixed_halves``): a coin flip per sentence decides which copy gets which side.
    Why: with fixed sides copy 1 only ever encodes sentence beginnings and copy 2 only endings, so the two
    copies are pushed to specialise (a left-half and a right-half encoder), while each copy is evaluated alone
    on whole sentences; mixing keeps the task symmetric between the copies.

    ``span_words=k``: each side keeps only the words next to the cut, a number drawn uniformly from
    ``[min(3, side), min(k, side)]`` for each side independently. Why: whole halves of one sentence have
    correlated lengths (both halves of a long sentence are long), so the copies can match positives by length
    (mean pooling over position embeddings encodes it) instead of by co-occurring words; spans with
    independently drawn lengths remove that shortcut (DeCLUTR likewise draws span lengths independently of the text).
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
