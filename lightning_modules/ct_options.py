"""CT options for training from scratch (ours, not in the CT paper): frozen bottom layers, length-matched negatives.

Kept apart from ``contrastive_tension.py`` (the paper's method) because they exist for one experiment: a randomly
initialised BERT trained by CT (issue 3, docs/dev/scratch-learning-signal.md), where the untrained model's random
token vectors and its position-encoded length are the things CT must neither destroy nor exploit.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from sts_lightning.embeddings.errors import ConfigError


def freeze_bottom(model: torch.nn.Module, frozen_layers: int | None) -> None:
    """Stop gradients into the embeddings and the first ``frozen_layers`` transformer layers (``None``: none).

    Why (ours, for training from scratch): mean pooling over a random BERT is already a useful bag-of-words
    measure (STS-B dev 55.5; whitened 68.1, docs/dev/scratch-learning-signal.md), and CT's adaptive updates move
    every random weight by about the learning rate per step, so after a few hundred steps the bottom layers'
    random features are rewritten faster than the objective can replace them with better ones. Freezing them
    lets CT reshape only the top of the network.
    """
    if frozen_layers is None:
        return
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if getattr(model, "embeddings", None) is None or layers is None:
        raise ConfigError(f"model.frozen_layers needs a BERT-style model (embeddings + encoder.layer), "
                          f"got {type(model).__name__}")
    if not 0 <= frozen_layers < len(layers):
        raise ConfigError(f"model.frozen_layers={frozen_layers} must be in 0..{len(layers) - 1} for this "
                          f"{len(layers)}-layer model (null trains everything)")
    model.embeddings.requires_grad_(False)
    for layer in layers[:frozen_layers]:
        layer.requires_grad_(False)


CT_TRAINABLE = ("all", "word_embeddings")


def train_only_word_embeddings(model: torch.nn.Module) -> None:
    """Freeze every weight but the word-embedding matrix: the random transformer stays a fixed feature mixer.

    Why (ours, for training from scratch): CT with halves as positives can only agree on co-occurring words,
    which is a property of the word vectors. On a bag of wordpieces (no positions) that objective lifts STS-B dev
    from 58.3 to 67.8 in two epochs over the 100k Wikipedia sentences (``benchmarks.studies.bag_of_words_ct``), but as soon as the encoder sees positions it
    matches halves by their (correlated) lengths instead, and a random BERT whose layers CT may update does just
    that: AdamW on all weights takes STS-B dev from 55.5 to 39 in 200 steps, one direction holding half the
    variance and the cosine following the length difference (docs/dev/scratch-learning-signal.md, "Session 8").
    With only the word rows trainable, the frozen random layers and position embeddings can still carry length,
    but CT cannot sharpen that code; what it can change is which words look alike.
    """
    embeddings = getattr(getattr(model, "embeddings", None), "word_embeddings", None)
    if not isinstance(embeddings, torch.nn.Embedding):
        raise ConfigError(f"model.trainable=word_embeddings needs a BERT-style model (embeddings.word_embeddings), "
                          f"got {type(model).__name__}")
    model.requires_grad_(False)
    embeddings.requires_grad_(True)


def length_matched_groups(sentences: list[str], groups: int) -> list[Tensor]:
    """Row indices of ``groups`` equal-sized groups of sentences of similar length (by words), shortest first.

    Why (ours, for training from scratch): mean pooling over position embeddings encodes a sentence's length,
    and with random negatives the copies learn to tell sentences apart by length (measured: after in-batch CT
    the cosine of STS-B pairs follows their length difference, Spearman 0.41, and STS-B dev falls); within a
    group of equal lengths only the words tell sentences apart. Under DDP every rank forms the same number of
    groups of the same size, so group ``k`` is gathered with group ``k`` of the other ranks.
    """
    if groups == 1:
        return [torch.arange(len(sentences))]
    if len(sentences) % groups or len(sentences) // groups < 2:
        raise ConfigError(f"model.length_groups={groups} must divide the device batch of {len(sentences)} "
                          "sentences into groups of at least 2 (data.batch_size)")
    order = torch.as_tensor(np.argsort([len(s.split()) for s in sentences], kind="stable"))
    return list(order.chunk(groups))
