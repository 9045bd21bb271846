"""``in_fp32`` (embeddings.methods.shared.precision) through its users: under bf16 autocast the losses are fp32."""

from __future__ import annotations

import torch

from sts_lightning.embeddings.methods.shared.in_batch import multiple_negatives_ranking_loss


def test_losses_under_bf16_autocast_are_computed_in_fp32():
    """bf16-mixed: the embeddings arrive in bf16, but similarities, logits and the loss are fp32."""
    from sts_lightning.embeddings.methods.ct.objective import ct_logits, ct_loss

    torch.manual_seed(0)
    a, b = torch.randn(8, 32).bfloat16(), torch.randn(8, 32).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mnrl = multiple_negatives_ranking_loss(a, b, gather=False)
        logits = ct_logits(a, b)
    assert mnrl.dtype == logits.dtype == torch.float32
    torch.testing.assert_close(mnrl, multiple_negatives_ranking_loss(a.float(), b.float(), gather=False))
    torch.testing.assert_close(logits, ct_logits(a.float(), b.float()))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bf16_matmul = (torch.nn.functional.normalize(a.float(), dim=-1) @ torch.nn.functional.normalize(b.float(), dim=-1).T)
    assert bf16_matmul.dtype == torch.bfloat16  # what autocast alone would have done to the similarity matrix
    assert ct_loss(logits, torch.ones(8)).dtype == torch.float32
