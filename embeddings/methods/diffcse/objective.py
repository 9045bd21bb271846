"""DiffCSE's objective (Chuang et al., NAACL 2022) as pure functions on tensors.

The loss of ``cl_forward`` in voidism/DiffCSE (``diffcse/models.py``): SimCSE's InfoNCE over two dropout views
(``simcse_loss``) plus ``lambda_weight`` times a replaced-token-detection (RTD) cross-entropy. What the authors' code
does, and so what this does (the paper's text says "sampled" where the code takes the arg-max):

- the generator's arg-max token at EVERY position of the masked sentence (not only the masked ones), the first
  position set back to [CLS]; a position counts as replaced where that token differs from the original one, padding
  never (``edit_tokens``);
- the RTD loss is the mean two-class cross-entropy over all positions of the padded batch, padding included with
  label "not replaced" (``rtd_loss``: ``CrossEntropyLoss`` over ``prediction_scores.view(-1, 2)``), so it depends on
  how the batch is padded: both views of a batch are padded to the batch's longest sentence, as their collator does.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch.nn.functional as F
from torch import Tensor

from sts_lightning.embeddings.methods.shared.matryoshka import matryoshka_loss
from sts_lightning.embeddings.methods.shared.precision import in_fp32
from sts_lightning.embeddings.methods.simcse.objective import simcse_loss

__all__ = ["diffcse_loss", "edit_tokens", "rtd_accuracy", "rtd_loss"]


def edit_tokens(predicted: Tensor, input_ids: Tensor, attention_mask: Tensor, cls_id: int) -> tuple[Tensor, Tensor]:
    """(the edited sentences the discriminator reads, 0/1 replaced labels) from the generator's arg-max ids.

    ``predicted``: the generator's arg-max token per position of the masked rows; ``input_ids``: the original rows.
    Padding positions get id 0 and label 0 (``g_pred * attention_mask``), the first position ``cls_id``.
    """
    edited = predicted.clone()
    edited[:, 0] = cls_id
    mask = attention_mask.to(edited.dtype)
    replaced = (edited != input_ids).to(edited.dtype) * mask
    return edited * mask, replaced


@in_fp32
def rtd_loss(logits: Tensor, replaced: Tensor) -> Tensor:
    """Mean cross-entropy of ``logits`` ``(rows, length, 2)`` against ``replaced`` ``(rows, length)``, over every
    position of the padded rows (padding included, label 0), as the authors' code computes it."""
    return F.cross_entropy(logits.reshape(-1, 2), replaced.reshape(-1).long())


def rtd_accuracy(logits: Tensor, replaced: Tensor, attention_mask: Tensor) -> Tensor:
    """Share of the real (non-padding) positions whose replaced / kept label the discriminator gets right (the
    authors' ``electra_acc``)."""
    mask = attention_mask.bool()
    right = (logits.detach().argmax(-1) == replaced) & mask
    return right.sum().float() / mask.sum().clamp(min=1).float()


def diffcse_loss(view1: Tensor, view2: Tensor, rtd_logits: Tensor, replaced: Tensor, temperature: float = 0.05,
                 lambda_weight: float = 0.005, gather: bool = True,
                 matryoshka: tuple[Sequence[int], Sequence[float]] | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """(total, contrastive, RTD) losses: ``simcse_loss(view1, view2) + lambda_weight * rtd_loss``.

    ``view1`` / ``view2``: the two dropout views' vectors (after the training MLP); ``rtd_logits``: the
    discriminator's per-token logits of both views' edited rows, conditioned on those same vectors.
    ``matryoshka``: ``(dims, weights)``: the InfoNCE term on each re-normalised prefix, weighted (``matryoshka_loss``);
    the RTD term stays ONE term on the full vector. Why: the discriminator reads the vector as its [CLS] input
    embedding, which has the hidden size; a prefix padded with zeros would be an input it never sees at evaluation
    or in the recipe, and the term's purpose (the vector must say what the edit changed) is the vector's, so the
    prefixes are trained by the contrastive term alone and the full vector keeps the recipe's RTD pressure.
    """
    if not lambda_weight >= 0:
        raise ValueError(f"lambda_weight must be >= 0, got {lambda_weight}")
    def infonce(a: Tensor, b: Tensor) -> Tensor:
        return simcse_loss(a, b, temperature=temperature, gather=gather)

    contrastive = (infonce if matryoshka is None else matryoshka_loss(infonce, *matryoshka))(view1, view2)
    detection = rtd_loss(rtd_logits, replaced)  # also at lambda 0: logged, and the discriminator stays in the graph
    return contrastive + lambda_weight * detection, contrastive, detection
