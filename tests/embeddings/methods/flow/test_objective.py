"""BERT-flow's objective (embeddings.methods.flow.objective): the change-of-variables density by hand, and the
training loss is the Glow's mean NLL in bits per dimension, in float32 under bf16 autocast."""

from __future__ import annotations

import math

import pytest
import torch

from sts_lightning.embeddings.methods.flow.glow import Glow
from sts_lightning.embeddings.methods.flow.objective import bits_per_dim, flow_nll_loss, log_likelihood


def test_log_likelihood_and_bits_by_hand():
    z = torch.tensor([[0.0, 0.0], [1.0, -1.0]])
    log_det = torch.tensor([0.0, 0.5])
    want = [-math.log(2 * math.pi), 0.5 - 1.0 - math.log(2 * math.pi)]
    assert log_likelihood(z, log_det).tolist() == pytest.approx(want)
    assert bits_per_dim(torch.tensor(want), 2).tolist() == pytest.approx([-w / (2 * math.log(2)) for w in want])


def test_loss_is_the_mean_nll_and_fp32_under_bf16_autocast():
    torch.manual_seed(0)
    flow = Glow(8, levels=2, depth=1, hidden=4)
    x = torch.randn(16, 8)
    flow(x)  # the data-dependent init
    torch.testing.assert_close(flow_nll_loss(flow, x), flow.nll(x).mean())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = flow_nll_loss(flow, x.bfloat16())
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, flow.nll(x.bfloat16().float()).mean())
