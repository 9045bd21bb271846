"""BERT-flow's objective (Li et al., EMNLP 2020): the Glow's negative log-likelihood, as tensor functions.

The flow maps a pooled sentence vector ``x`` to ``z`` with a tractable ``log|det dz/dx|``; under the standard
normal prior the change of variables gives ``log p(x)`` (:func:`log_likelihood`), and the training objective is
its negative in bits per dimension (:func:`bits_per_dim`, the reference's ``-log p / (C log 2)``), averaged over
the batch (:func:`flow_nll_loss`). Every row is self-contained, so under DDP each rank takes its own mean.
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
    """Mean negative log-likelihood in bits per dimension of the vectors ``x`` under ``flow`` (a ``Glow``).

    Always float32, also under ``precision=bf16-mixed``: the log-determinants sum many small terms
    and bf16 matmuls would make the density (and its gradient) too coarse to fit.
    """
    with torch.autocast(device_type=x.device.type, enabled=False):
        return flow.nll(x.float()).mean()
