"""Training objectives as pure functions on tensors (no modules, no Lightning).

Keeping the maths here, apart from the LightningModules, lets the tests pin each objective to the paper
and to an independent implementation with hand-made tensors, and lets a module swap encoders freely.

None of these objectives uses in-batch negatives: every row is a self-contained pair. Under DDP each rank
therefore computes its loss on its own shard with no gather, and DDP's gradient averaging of per-rank
means equals the global mean when ranks hold equal batch sizes (the DataModules guarantee that).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "ct_batch_labels",
    "ct_logits",
    "ct_loss",
    "make_ct_pairs",
    "sbert_nli_loss",
    "sbert_softmax_logits_input",
]


def in_fp32(fn: Callable) -> Callable:
    """Run a loss with autocast off and its bf16 / fp16 tensor arguments in float32.

    Why: under ``trainer.precision=bf16-mixed`` the embeddings arrive in bf16 (8 mantissa bits) and autocast
    would also run the similarity matmul in bf16; a cosine x 20 (MNRL) or an unbounded CT dot product is
    then off by ~0.1 in the logit, noise of the size of the signal between close candidates. The encoder's
    forward pass keeps the speed-up; the few (n x n) products of the loss cost nothing in fp32.
    """

    def cast(x):  # float64 stays float64
        return x.float() if isinstance(x, Tensor) and x.dtype in (torch.bfloat16, torch.float16) else x

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        device = next((a.device.type for a in args if isinstance(a, Tensor)), "cpu")
        with torch.autocast(device_type=device, enabled=False):
            return fn(*map(cast, args), **{k: cast(v) for k, v in kwargs.items()})

    return wrapper


# --------------------------------------------------------------------------------------------- SBERT
def sbert_softmax_logits_input(u: Tensor, v: Tensor) -> Tensor:
    """Classifier features ``(u, v, |u - v|)`` of SBERT's NLI objective.

    Reimers & Gurevych (2019), Sec. 3, "Classification Objective Function": ``o = softmax(W_t (u, v,
    |u - v|))`` with ``W_t`` of shape ``(k, 3n)``. The paper's ablation (Sec. 6) found this
    concatenation best and ``u * v`` no help, so it is not offered. The order matches sentence-transformers'
    ``SoftmaxLoss`` so that its classifier weights can be loaded as is.

    Args:
        u: ``(batch, n)`` embeddings of the premises.
        v: ``(batch, n)`` embeddings of the hypotheses.

    Returns:
        ``(batch, 3n)`` features; the caller applies its ``nn.Linear(3n, 3)`` to get logits.
    """
    if u.shape != v.shape:
        raise ValueError(f"u and v must have the same shape, got {tuple(u.shape)} and {tuple(v.shape)}")
    return torch.cat([u, v, (u - v).abs()], dim=-1)


def sbert_nli_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean cross-entropy of the 3-way NLI classifier (Reimers & Gurevych 2019, Sec. 3).

    Args:
        logits: ``(batch, 3)`` raw classifier outputs (softmax is inside the loss, as in the paper's
            "optimize cross-entropy loss").
        labels: ``(batch,)`` integer classes (entailment / neutral / contradiction, any fixed order).

    Returns:
        Scalar mean loss over the batch.
    """
    return F.cross_entropy(logits, labels.long())


# ------------------------------------------------------------------------------- Contrastive Tension
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


def _group_size(batch_size: int, positives: int) -> int:
    if positives < 1 or batch_size < 2 or batch_size % positives or batch_size // positives < 2:
        raise ValueError(
            f"batch_size={batch_size} must split into `positives`={positives} groups of one positive "
            "and at least one negative pair"
        )
    return batch_size // positives


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
