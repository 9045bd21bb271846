"""BERT-flow's objective (Li et al., EMNLP 2020): the Glow's negative log-likelihood in bits per dimension
(the reference's ``-log p / (C log 2)``), averaged over the batch; rows are self-contained (no DDP gather).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["bits_per_dim", "flow_nll_loss", "log_likelihood"]


def log_likelihood(z: Tensor, log_det: Tensor) -> Tensor:
    """``log p(x)`` in nats per vector: the N(0, I) log-density of ``z`` ``(batch, dim)`` plus ``log_det``."""
    return log_det - 0.5 * (z**2).sum(-1) - 0.5 * z.shape[-1] * math.log(2 * math.pi)


def bits_per_dim(log_p: Tensor, dim: int) -> Tensor:
    """Negative log-likelihood in bits per dimension, per vector, from ``log p`` in nats."""
    return -log_p / (dim * math.log(2.0))


def flow_nll_loss(flow: nn.Module, x: Tensor) -> Tensor:
    """Mean negative log-likelihood in bits per dimension of ``x`` under ``flow``, always float32 (bf16 would make the
    density too coarse to fit)."""
    with torch.autocast(device_type=x.device.type, enabled=False):
        return flow.nll(x.float()).mean()
