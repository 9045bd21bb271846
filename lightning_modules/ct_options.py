"""CT options for training a randomly initialised BERT (ours, not in the CT paper): frozen bottom layers, trained
word embeddings only, length-matched negatives, an own learning rate for the word embeddings.

Why apart from ``ct.py`` (the paper's method): they exist for one experiment, where the untrained model's random
token vectors and its position-encoded length are what CT must neither destroy nor exploit
(docs/dev/scratch-learning-signal.md holds the measurements).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from sts_lightning.embeddings.errors import ConfigError


def freeze_bottom(model: torch.nn.Module, frozen_layers: int | None) -> None:
    """Stop gradients into the embeddings and the first ``frozen_layers`` layers (``None``: none): CT rewrites a
    random BERT's bottom features (already a useful bag of words) faster than it finds better ones."""
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
    """Freeze every weight but the word-embedding matrix: a random BERT whose layers CT may update matches halves by
    their (correlated) lengths; with only the word rows trainable it can change only which words look alike."""
    embeddings = getattr(getattr(model, "embeddings", None), "word_embeddings", None)
    if not isinstance(embeddings, torch.nn.Embedding):
        raise ConfigError(f"model.trainable=word_embeddings needs a BERT-style model (embeddings.word_embeddings), "
                          f"got {type(model).__name__}")
    model.requires_grad_(False)
    embeddings.requires_grad_(True)


def length_matched_groups(sentences: list[str], groups: int) -> list[Tensor]:
    """Row indices of ``groups`` equal-sized groups of sentences of similar word count, shortest first (the same on
    every rank): position embeddings encode length, so within a group only the words tell sentences apart."""
    if groups == 1:
        return [torch.arange(len(sentences))]
    if len(sentences) % groups or len(sentences) // groups < 2:
        raise ConfigError(f"model.length_groups={groups} must divide the device batch of {len(sentences)} "
                          "sentences into groups of at least 2 (data.batch_size)")
    order = torch.as_tensor(np.argsort([len(s.split()) for s in sentences], kind="stable"))
    return list(order.chunk(groups))


def with_embedding_lr(groups: list[dict], named_parameters, lr: float | None) -> list[dict]:
    """``groups`` with the word-embedding matrices in a group of their own at ``lr`` (``None``: unchanged): from
    scratch a row gets a gradient only in steps whose batch holds its token, so it needs a larger lr."""
    if lr is None:
        return groups
    embeddings = [p for n, p in named_parameters if n.endswith("word_embeddings.weight") and p.requires_grad]
    chosen = {id(p) for p in embeddings}
    for group in groups:
        group["params"] = [p for p in group["params"] if id(p) not in chosen]
    return [*groups, {"params": embeddings, "weight_decay": 0.0, "lr": float(lr)}]
