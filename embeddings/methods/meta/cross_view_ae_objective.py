"""The cross-view autoencoder's objective (Poerner et al. 2020, Sec. 3.4) as pure functions on tensors.

Every view ``x_j'`` is reconstructed from every code ``E_j(x_j)``: ``L = sum_j sum_j' l(x_j', D_j'(E_j(x_j)))``; the
cross terms force one sentence's codes to agree across sources. Losses (Neill & Bollegala 2018): ``mse``, ``mae``,
``kld`` (softmax of both read as logits) and ``cos2`` ((1 - cos)^2); rows are self-contained (no DDP gather).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from sts_lightning.embeddings.errors import unknown_choice

__all__ = ["AE_LOSSES", "cross_view_loss_terms", "reconstruction_loss"]

AE_LOSSES = ("mse", "mae", "kld", "cos2")


def reconstruction_loss(target: Tensor, pred: Tensor, kind: str) -> Tensor:
    """Mean over the batch of one reconstruction term (``mse`` / ``mae`` average over dimensions too)."""
    if kind == "mse":
        return F.mse_loss(pred, target)
    if kind == "mae":
        return F.l1_loss(pred, target)
    if kind == "kld":
        return F.kl_div(F.log_softmax(pred, -1), F.log_softmax(target, -1), reduction="batchmean", log_target=True)
    if kind == "cos2":
        return ((1.0 - F.cosine_similarity(pred, target, dim=-1)) ** 2).mean()
    raise unknown_choice("cross-view AE loss", kind, AE_LOSSES)


def cross_view_loss_terms(xs: Sequence[Tensor], codes: Sequence[Tensor], decoders: Sequence[Callable[[Tensor], Tensor]],
                          kind: str = "mse") -> Tensor:
    """``(J, J)`` matrix: entry ``[j, j']`` reconstructs ``xs[j']`` by ``decoders[j']`` from ``codes[j]``; its sum is the loss."""
    return torch.stack([torch.stack([reconstruction_loss(xs[k], decoders[k](code), kind)
                                     for k in range(len(xs))]) for code in codes])
