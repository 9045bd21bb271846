"""DiffCSE's objective (Chuang et al., NAACL 2022), ``cl_forward`` of voidism/DiffCSE: SimCSE's InfoNCE plus
``lambda_weight`` times a replaced-token-detection (RTD) cross-entropy. As the code, not the paper ("sampled"): the
generator's arg-max at EVERY position; RTD averages over the padded batch, so both views pad to the batch's longest.
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
    """(edited sentences, 0/1 replaced labels) from the generator's arg-max ids; padding gets id 0 and label 0
    (``g_pred * attention_mask``), the first position ``cls_id``."""
    edited = predicted.clone()
    edited[:, 0] = cls_id
    mask = attention_mask.to(edited.dtype)
    replaced = (edited != input_ids).to(edited.dtype) * mask
    return edited * mask, replaced


@in_fp32
def rtd_loss(logits: Tensor, replaced: Tensor) -> Tensor:
    """Mean cross-entropy of ``logits`` ``(rows, length, 2)`` against ``replaced`` over every padded position."""
    return F.cross_entropy(logits.reshape(-1, 2), replaced.reshape(-1).long())


def rtd_accuracy(logits: Tensor, replaced: Tensor, attention_mask: Tensor) -> Tensor:
    """Share of the real positions whose replaced / kept label is right (the authors' ``electra_acc``)."""
    mask = attention_mask.bool()
    right = (logits.detach().argmax(-1) == replaced) & mask
    return right.sum().float() / mask.sum().clamp(min=1).float()


def diffcse_loss(view1: Tensor, view2: Tensor, rtd_logits: Tensor, replaced: Tensor, temperature: float = 0.05,
                 lambda_weight: float = 0.005, gather: bool = True,
                 matryoshka: tuple[Sequence[int], Sequence[float]] | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """(total, contrastive, RTD) losses; ``matryoshka`` ``(dims, weights)`` applies to InfoNCE only (the discriminator
    reads the whole vector)."""
    if not lambda_weight >= 0:
        raise ValueError(f"lambda_weight must be >= 0, got {lambda_weight}")
    def infonce(a: Tensor, b: Tensor) -> Tensor:
        return simcse_loss(a, b, temperature=temperature, gather=gather)

    contrastive = (infonce if matryoshka is None else matryoshka_loss(infonce, *matryoshka))(view1, view2)
    detection = rtd_loss(rtd_logits, replaced)  # also at lambda 0: logged, and the discriminator stays in the graph
    return contrastive + lambda_weight * detection, contrastive, detection
