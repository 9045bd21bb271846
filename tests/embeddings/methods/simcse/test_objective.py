"""SimCSE's objective (embeddings.methods.simcse.objective): the loss by hand, against sentence-transformers'
MultipleNegativesRankingLoss, and the 2-rank gather."""

from __future__ import annotations

import math

import pytest
import torch
import torch.multiprocessing as mp

from sts_lightning.embeddings.methods.shared.in_batch import multiple_negatives_ranking_loss
from sts_lightning.embeddings.methods.simcse.objective import simcse_loss
from tests.helpers import WORDS

SENTENCES = [f"{a} {b} {c} ." for a, b, c in zip(WORDS[::3], WORDS[1::3], WORDS[2::3], strict=False)]


def test_simcse_loss_by_hand():
    v1 = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    v2 = torch.tensor([[3.0, 0.0], [1.0, 1.0]])
    hard = torch.tensor([[0.0, -1.0], [-1.0, 0.0]])
    s = 1 / math.sqrt(2)
    cos = [[1.0, s, 0.0, -1.0], [0.0, s, -1.0, 0.0]]  # anchor i vs [p0, p1, h0, h1]

    def by_hand(columns: int, weight: float = 0.0, temperature: float = 0.05) -> float:
        total = 0.0
        for i in range(2):
            logits = [c / temperature for c in cos[i][:columns]]
            if columns == 4:
                logits[2 + i] += weight  # only the anchor's OWN hard negative (cl_forward's weights)
            total += -(logits[i] - math.log(sum(math.exp(v) for v in logits)))
        return total / 2

    # fp32 log-sum-exp of logits up to ~21.5: absolute rounding of a few eps x the largest logit
    tol = 8 * torch.finfo(torch.float32).eps * 21.5
    assert simcse_loss(v1, v2).item() == pytest.approx(by_hand(2), rel=1e-5, abs=tol)
    assert simcse_loss(v1, v2, temperature=0.5).item() == pytest.approx(by_hand(2, temperature=0.5), rel=1e-5, abs=tol)
    assert simcse_loss(v1, v2, hard).item() == pytest.approx(by_hand(4), rel=1e-5, abs=tol)
    assert simcse_loss(v1, v2, hard, hard_negative_weight=1.5).item() == pytest.approx(by_hand(4, 1.5), rel=1e-5, abs=tol)
    # a weight large enough to matter: anchor i's own hard negative now outscores its positive
    assert simcse_loss(v1, v2, hard, hard_negative_weight=40.0).item() == pytest.approx(by_hand(4, 40.0), rel=1e-5)
    with pytest.raises(ValueError, match="temperature"):
        simcse_loss(v1, v2, temperature=0.0)
    with pytest.raises(ValueError, match="one row per anchor"):
        simcse_loss(v1, v2, hard[:1])


def test_unsupervised_simcse_is_mnrl_at_scale_one_over_temperature():
    torch.manual_seed(0)
    v1, v2 = torch.randn(6, 8), torch.randn(6, 8)
    for t in (0.05, 0.1):
        torch.testing.assert_close(simcse_loss(v1, v2, temperature=t),
                                   multiple_negatives_ranking_loss(v1, v2, scale=1 / t))


def test_matches_sentence_transformers_mnrl_on_sentence_pairs(tiny_model_dir):
    """sentence-transformers' SimCSE recipe: MultipleNegativesRankingLoss(scale=20) on (s, s) columns."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    model = SentenceTransformer(str(tiny_model_dir), device="cpu").eval()  # eval: both sides see the same vectors
    s = SENTENCES[:6]
    with torch.no_grad():
        theirs = MultipleNegativesRankingLoss(model, scale=20.0)([model.preprocess(s), model.preprocess(s)], None)
        emb = model(model.preprocess(s))["sentence_embedding"]
        torch.testing.assert_close(simcse_loss(emb, emb, temperature=0.05), theirs, rtol=1e-5, atol=1e-6)


def _rank_grads(rank: int, world: int, init_file: str, tensors, out) -> None:
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        n = tensors[0].shape[0] // world
        parts = [t[rank * n:(rank + 1) * n].clone().requires_grad_(True) for t in tensors]
        loss = simcse_loss(*parts, hard_negative_weight=0.7)
        loss.backward()
        out[rank] = (loss.detach(), [p.grad.clone() for p in parts])
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow  # 2 spawned DDP ranks: 8-18 s on 2 shared cores
def test_two_rank_gather_gives_the_single_device_gradient(tmp_path):
    """Gathered with gradients: DDP's average of per-rank gradients equals the global batch's gradient."""
    torch.manual_seed(0)
    tensors = [torch.randn(8, 5) for _ in range(3)]
    full = [t.clone().requires_grad_(True) for t in tensors]
    single = simcse_loss(*full, hard_negative_weight=0.7)
    single.backward()
    out = mp.Manager().dict()
    mp.spawn(_rank_grads, args=(2, str(tmp_path / "init"), tensors, out), nprocs=2)
    torch.testing.assert_close((out[0][0] + out[1][0]) / 2, single.detach(), rtol=1e-5, atol=1e-6)
    for r in range(2):
        for got, want in zip(out[r][1], (t.grad[r * 4:(r + 1) * 4] for t in full), strict=True):
            torch.testing.assert_close(got / 2, want, rtol=1e-5, atol=1e-6)
