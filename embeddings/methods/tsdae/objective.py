"""TSDAE's objective (Wang, Reimers & Gurevych, EMNLP Findings 2021): deletion noise and the reconstruction loss.

As sentence-transformers' ``DenoisingAutoEncoderDataset.delete`` and ``DenoisingAutoEncoderLoss``, but without
nltk: words are whitespace-separated (nltk splits punctuation off), the draws are the same.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sts_lightning.embeddings.methods.shared.precision import in_fp32

__all__ = ["IGNORE", "add_noise", "decoder_loss", "delete_words", "noise_rng", "reconstruction_loss"]


def noise_rng(seed: int, rank: int, step: int) -> np.random.Generator:
    """One rank's deletion noise at one optimizer step: a pure function, so a resumed run draws the same noise."""
    return np.random.default_rng([int(seed), int(rank), int(step)])


def delete_words(text: str, rng, ratio: float = 0.6) -> str:
    """``text`` with each whitespace word deleted with probability ``ratio``, at least one kept; ``rng`` (numpy) is
    drawn as sentence-transformers draws ``np.random``."""
    words = text.split()
    n = len(words)
    if n == 0:
        return text
    keep = rng.random(n) > ratio
    if not keep.any():
        keep[rng.choice(n)] = True  # guarantee that at least one word remains
    return " ".join(word for word, kept in zip(words, keep, strict=True) if kept)


def add_noise(sentences: Sequence[str], rng, ratio: float = 0.6) -> list[str]:
    """``delete_words`` over a batch, in order, from one generator."""
    return [delete_words(s, rng, ratio) for s in sentences]


IGNORE = -100  # the label of a padding position: no loss


@in_fp32
def reconstruction_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """``DenoisingAutoEncoderLoss``'s token-level cross-entropy, ``IGNORE`` positions left out, in float32 (a softmax
    over the vocabulary)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE)


def _lm_head(decoder: nn.Module) -> nn.Module | None:
    """The decoder's LM head where it is the one module beside its body (BERT's ``cls``, RoBERTa's ``lm_head``)."""
    heads = [module for name, module in decoder.named_children() if name != decoder.base_model_prefix]
    return heads[0] if len(heads) == 1 else None


def decoder_loss(decoder: nn.Module, sentence_vectors: Tensor, target_ids: Tensor, target_mask: Tensor) -> Tensor:
    """``DenoisingAutoEncoderLoss.forward``: ``decoder`` reconstructs ``target_ids`` attending only to the sentence
    vector. Two departures that leave the loss unchanged: the decoder gets its input's padding mask, and the LM head
    runs on labelled positions only where it is a module beside the body (BERT, RoBERTa)."""
    inputs = target_ids[:, :-1]
    labels = target_ids[:, 1:].masked_fill(target_mask[:, 1:] == 0, IGNORE)
    memory = sentence_vectors[:, None]  # (batch, 1, hidden)
    kwargs = {"attention_mask": target_mask[:, :-1], "encoder_hidden_states": memory, "use_cache": False,
              "encoder_attention_mask": torch.ones(memory.shape[:2], dtype=target_mask.dtype, device=memory.device),
              "return_dict": True}
    head = _lm_head(decoder)
    if head is None:
        return reconstruction_loss(decoder(input_ids=inputs, **kwargs).logits, labels)
    hidden = decoder.base_model(input_ids=inputs, **kwargs).last_hidden_state
    keep = labels != IGNORE
    return reconstruction_loss(head(hidden[keep]), labels[keep])
