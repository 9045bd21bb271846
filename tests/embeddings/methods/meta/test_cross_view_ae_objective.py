"""The cross-view autoencoder's reconstruction losses (embeddings.methods.meta.cross_view_ae_objective) by hand."""

from __future__ import annotations

import math

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.meta.cross_view_ae_objective import reconstruction_loss


def test_reconstruction_losses_by_hand():
    target, pred = torch.tensor([[1.0, 0.0], [0.0, 2.0]]), torch.tensor([[0.5, 0.5], [1.0, 1.0]])
    assert reconstruction_loss(target, pred, "mse").item() == pytest.approx((0.25 + 0.25 + 1 + 1) / 4)
    assert reconstruction_loss(target, pred, "mae").item() == pytest.approx((0.5 + 0.5 + 1 + 1) / 4)
    cos = [0.5 / math.sqrt(0.5), 2 / (2 * math.sqrt(2))]
    assert reconstruction_loss(target, pred, "cos2").item() == pytest.approx(sum((1 - c) ** 2 for c in cos) / 2)
    p, q = torch.softmax(target, -1), torch.softmax(pred, -1)
    kld = (p * (p.log() - q.log())).sum(-1).mean()
    assert reconstruction_loss(target, pred, "kld").item() == pytest.approx(kld.item(), rel=1e-5)
    with pytest.raises(ConfigError):
        reconstruction_loss(target, pred, "huber")
