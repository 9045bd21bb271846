"""DiffCSE's edits and losses (embeddings.methods.diffcse.objective) on hand-made tensors; the whole loss against
the authors' code is tests/lightning_modules/test_diffcse_parity.py."""

from __future__ import annotations

import math

import pytest
import torch

from sts_lightning.embeddings.methods.diffcse.objective import (
    diffcse_loss,
    edit_tokens,
    rtd_accuracy,
    rtd_loss,
)
from sts_lightning.embeddings.methods.simcse.objective import simcse_loss


def test_edits_are_the_generator_tokens_with_cls_first_and_padding_zero():
    original = torch.tensor([[101, 7, 8, 102, 0], [101, 9, 102, 0, 0]])
    mask = (original != 0).long()
    predicted = torch.tensor([[55, 7, 4, 102, 3], [101, 6, 5, 1, 1]])
    edited, replaced = edit_tokens(predicted, original, mask, cls_id=101)
    assert edited.tolist() == [[101, 7, 4, 102, 0], [101, 6, 5, 0, 0]]
    # every real position counts, the [SEP] one included (the authors' code); position 0 never, padding never
    assert replaced.tolist() == [[0, 0, 1, 0, 0], [0, 1, 1, 0, 0]]
    assert predicted[0, 0] == 55  # the input is not changed


def test_rtd_loss_averages_over_every_position_padding_included():
    logits = torch.zeros(2, 3, 2)
    logits[..., 1] = torch.tensor([[2.0, -1.0, 0.5], [0.0, 3.0, 2.0]])
    replaced = torch.tensor([[1, 0, 0], [0, 1, 0]])
    p1 = torch.sigmoid(logits[..., 1] - logits[..., 0])
    want = -torch.where(replaced.bool(), p1.log(), (1 - p1).log()).mean()
    assert rtd_loss(logits, replaced).item() == pytest.approx(want.item(), abs=1e-6)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    assert rtd_accuracy(logits, replaced, mask).item() == pytest.approx(4 / 5)  # (1, 2) wrong; (0, 2) wrong but padding


def test_total_is_infonce_plus_lambda_times_rtd():
    torch.manual_seed(0)
    v1, v2, logits = torch.randn(4, 8), torch.randn(4, 8), torch.randn(8, 5, 2)
    replaced = torch.randint(0, 2, (8, 5))
    total, contrastive, detection = diffcse_loss(v1, v2, logits, replaced, temperature=0.05, lambda_weight=0.005,
                                                 gather=False)
    assert contrastive.item() == pytest.approx(simcse_loss(v1, v2, temperature=0.05, gather=False).item(), abs=1e-6)
    assert total.item() == pytest.approx(contrastive.item() + 0.005 * detection.item(), abs=1e-6)
    assert math.isfinite(detection.item()) and detection.item() > 0


def test_a_negative_lambda_is_refused():
    with pytest.raises(ValueError, match="lambda_weight"):
        diffcse_loss(torch.ones(2, 3), torch.ones(2, 3), torch.zeros(4, 2, 2), torch.zeros(4, 2), lambda_weight=-1.0)
