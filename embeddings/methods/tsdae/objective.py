"""TSDAE's objective (Wang, Reimers & Gurevych, EMNLP Findings 2021): deletion noise and the reconstruction loss.

The reference is sentence-transformers' ``DenoisingAutoEncoderDataset.delete`` and ``DenoisingAutoEncoderLoss``.
One forced departure: nltk is not installed, so words are whitespace-separated and rejoined with one space (nltk
splits punctuation off); the draws are the same, so whitespace words give the same noisy string. The noise is a
pure function of ``(seed, rank, step)`` (``noise_rng``), so a resumed run draws the same noise at the same step.
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
    """The generator of one rank's deletion noise at one optimizer step: a pure function of its arguments."""
    return np.random.default_rng([int(seed), int(rank), int(step)])


def delete_words(text: str, rng, ratio: float = 0.6) -> str:
    """``text`` with each whitespace word deleted with probability ``ratio``, at least one word kept, order kept.

    ``rng``: a numpy ``Generator`` or ``RandomState``, drawn as sentence-transformers draws ``np.random``.
    """
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
    """Token-level cross-entropy of the decoder's next-token ``logits`` ``(batch, length, vocab)`` against
    ``labels`` ``(batch, length)``, ``IGNORE`` positions left out: ``DenoisingAutoEncoderLoss``'s loss.
    In float32 under mixed precision (a softmax over the vocabulary)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE)


def _lm_head(decoder: nn.Module) -> nn.Module | None:
    """The decoder's LM head where it is the one module beside its body (BERT's ``cls``, RoBERTa's ``lm_head``)."""
    heads = [module for name, module in decoder.named_children() if name != decoder.base_model_prefix]
    return heads[0] if len(heads) == 1 else None


def decoder_loss(decoder: nn.Module, sentence_vectors: Tensor, target_ids: Tensor, target_mask: Tensor) -> Tensor:
    """TSDAE's loss: ``decoder`` (a causal LM with cross-attention) reconstructs ``target_ids`` token by token,
    attending only to the sentence vector (a memory of length 1); ``target_mask`` is 1 on real tokens.

    As ``DenoisingAutoEncoderLoss.forward``: inputs ``target_ids[:, :-1]``, labels ``target_ids[:, 1:]``, padding
    ignored. Two departures that leave the loss unchanged: the decoder gets its input's padding mask, and the LM head
    runs on labelled positions only where it is a module beside the body (BERT, RoBERTa).
    """
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
