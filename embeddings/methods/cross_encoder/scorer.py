"""Scoring pairs with a cross-encoder: the live model during training, or an export / Hugging Face directory.

One pair scorer (``PairScorer``) serves the STS callback, ``evaluate.py`` (``scorers=[{name:cross_encoder,
path:<dir>}]``), ``sts_lightning.load(<export>).similarity`` and AugSBERT's labelling, so all of them score what
was evaluated: one label -> ``sigmoid(logit)`` (sentence-transformers' ``CrossEncoder.predict``), three NLI labels
-> the probability of entailment.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from sts_lightning.embeddings.console import progress
from sts_lightning.embeddings.encoders.base import validate_sentences
from sts_lightning.embeddings.encoders.hf import resolve_device
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.export_manifest import verify_export
from sts_lightning.embeddings.methods.cross_encoder.pair_model import pair_logits
from sts_lightning.embeddings.scoring.scorer import PairScorer

DEFAULT_MAX_LENGTH = 256  # a pair holds two sentences: twice the 128 tokens of our sentence encoders


def pair_probability(logits: torch.Tensor, label2id: dict | None = None) -> torch.Tensor:
    """One label: its sigmoid; several: the softmax probability of ``entailment`` (label 0 where unnamed)."""
    logits = logits.float()
    if logits.shape[-1] == 1:
        return torch.sigmoid(logits[:, 0])
    index = {str(k).lower(): int(v) for k, v in (label2id or {}).items()}.get("entailment", 0)
    return torch.softmax(logits, dim=-1)[:, index]


class CrossEncoderPairScorer(PairScorer):
    """Scores pairs with ``model`` (a ``...ForSequenceClassification``) in batches of ``batch_size``, longest pairs
    first (less padding), checking for a stop between batches."""

    def __init__(self, model: torch.nn.Module, tokenizer, max_length: int = DEFAULT_MAX_LENGTH,
                 batch_size: int = 32, name: str = "cross_encoder") -> None:
        if int(batch_size) < 1:
            raise ConfigError(f"cross_encoder batch_size={batch_size}: must be >= 1")
        self.model, self.tokenizer = model, tokenizer
        self.max_length, self.batch_size, self.name = int(max_length), int(batch_size), name
        self.pairs_scored = 0  # the cost of a row: pairs read jointly (evaluate's pairs / s)

    def score_pairs(self, sentences1: Sequence[str], sentences2: Sequence[str]) -> torch.Tensor:
        if len(sentences1) != len(sentences2):
            raise ValueError(f"pair lists differ in length: {len(sentences1)} vs {len(sentences2)}")
        validate_sentences(sentences1, "sentences1")
        validate_sentences(sentences2, "sentences2")
        n = len(sentences1)
        order = np.argsort([-(len(a) + len(b)) for a, b in zip(sentences1, sentences2, strict=True)], kind="stable")
        scores = torch.empty(n, dtype=torch.float32)
        starts = range(0, n, self.batch_size)
        label2id = getattr(self.model.config, "label2id", None)
        with torch.inference_mode():
            for start in progress(starts, f"{self.name}: scoring pairs", disable=n < 2000, unit="batch"):
                rows = order[start:start + self.batch_size]
                logits = pair_logits(self.model, self.tokenizer, [sentences1[i] for i in rows],
                                     [sentences2[i] for i in rows], self.max_length)
                scores[torch.as_tensor(rows)] = pair_probability(logits, label2id).cpu()
        self.pairs_scored += n
        return scores


def load_cross_encoder(path: str, batch_size: int = 32, device: str | None = None,
                       max_length: int | None = None) -> CrossEncoderPairScorer:
    """A cross-encoder directory (our export, a sentence-transformers ``CrossEncoder`` or any Hugging Face
    sequence-classification model: a local path or, online, a hub name) as a pair scorer, in eval mode."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    local = Path(str(path)).expanduser()
    if local.is_dir():
        verify_export(local)  # an export of ours: every file as written
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(local if local.is_dir() else path))
        model = AutoModelForSequenceClassification.from_pretrained(str(local if local.is_dir() else path))
    except OSError as err:
        raise ConfigError(f"cross_encoder path={path!r}: not a directory with a Hugging Face sequence-classification "
                          f"model (a cross-encoder export), and the hub is unreachable or has no such model "
                          f"({str(err).splitlines()[0]})") from None
    if max_length is None:  # what the model was trained and exported with (CrossEncoder reads the same field)
        known = getattr(tokenizer, "model_max_length", None)
        max_length = int(known) if known and known < 100_000 else DEFAULT_MAX_LENGTH
        positions = getattr(model.config, "max_position_embeddings", None)  # a tokenizer without a limit: the model's
        max_length = min(max_length, int(positions)) if positions else max_length
    model = model.to(resolve_device(device)).eval()
    return CrossEncoderPairScorer(model, tokenizer, max_length=max_length, batch_size=batch_size)


class CrossEncoderScorer(CrossEncoderPairScorer):
    """``evaluate.py`` / ``sts_lightning.load``'s ``cross_encoder`` scorer: a cross-encoder directory, no encoder
    (``encoders=[none]``): ``scorers=[{name:cross_encoder,path:<dir>}]``."""

    def __init__(self, encoder, path: str, batch_size: int = 32, max_length: int | None = None,
                 device: str | None = None) -> None:
        loaded = load_cross_encoder(path, batch_size=batch_size, device=device, max_length=max_length)
        super().__init__(loaded.model, loaded.tokenizer, loaded.max_length, loaded.batch_size)
