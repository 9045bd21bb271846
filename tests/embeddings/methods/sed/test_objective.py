"""SED's objective (embeddings.methods.sed.objective): the MSE by hand and its gradient."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from sts_lightning.embeddings.errors import ConfigError


def test_sed_loss_matches_hand_computation_and_gradient():
    from sts_lightning.embeddings.methods.sed.objective import sed_loss

    student = torch.tensor([[1.0, 2.0], [0.0, -1.0]], requires_grad=True)
    target = torch.tensor([[0.0, 2.0], [1.0, 1.0]])
    loss = sed_loss(student, target)
    assert loss.item() == pytest.approx((1 + 0 + 1 + 4) / 4)
    assert torch.allclose(loss, F.mse_loss(student, target))
    loss.backward()
    assert torch.allclose(student.grad, 2 * (student - target).detach() / 4)
    with pytest.raises(ConfigError, match="equal shapes"):
        sed_loss(torch.zeros(2, 3), torch.zeros(2, 4))
