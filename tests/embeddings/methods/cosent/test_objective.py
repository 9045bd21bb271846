"""Scored-pair objectives (``embeddings.methods.cosent.objective``): by hand, against sentence-transformers'
``CosineSimilarityLoss`` / ``CoSENTLoss`` / ``AnglELoss`` on the same embeddings, in fp32 under bf16 autocast, and
under a 2-rank gloo group the gathered ranking loss equals the single-device loss on the global batch.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F

from sts_lightning.embeddings.methods.cosent.objective import (
    angle_full_loss,
    angle_loss,
    cosent_loss,
    cosine_similarity_loss,
    pairwise_angle_sim,
    ranking_loss,
)

# fp32 reductions over at most 16 x 16 pairs of numbers of size ~20: a few ulps of the result
TOL = {"rtol": 1e-6, "atol": 1e-6}


def test_ranking_by_hand():
    """Three pairs, gold 0 < 0.5 < 1: only pairs predicted in the wrong order cost much; ties cost nothing."""
    sims, gold = torch.tensor([0.9, 0.1, 0.5]), torch.tensor([0.0, 0.5, 1.0])
    s = 2.0 * sims
    terms = [s[0] - s[1], s[0] - s[2], s[1] - s[2]]  # (lower gold, higher gold) pairs: exp(s_low - s_high)
    by_hand = math.log(1 + sum(math.exp(t) for t in terms))
    assert ranking_loss(sims, gold, scale=2.0, gather=False).item() == pytest.approx(by_hand, rel=1e-6)
    # only the order of the gold scores matters
    assert ranking_loss(sims, gold * 5 + 1, scale=2.0, gather=False).item() == pytest.approx(by_hand, rel=1e-6)
    assert ranking_loss(sims, torch.full((3,), 0.4), gather=False).item() == 0.0  # all tied: log(1 + 0)
    ordered = ranking_loss(torch.tensor([0.1, 0.5, 0.9]), gold, scale=20.0, gather=False).item()
    assert 0 < ordered < 1e-3 < by_hand


def test_cosine_similarity_by_hand():
    u, v = torch.tensor([[1.0, 0.0], [1.0, 1.0]]), torch.tensor([[1.0, 0.0], [-1.0, 1.0]])  # cos 1 and 0
    assert cosine_similarity_loss(u, v, torch.tensor([0.5, 0.5])).item() == pytest.approx((0.25 + 0.25) / 2)


def test_angle_similarity_by_hand():
    """|cos + sin| of the complex reading (first half real, second imaginary): u = 1 vs v = i is cos 0,
    sin -1; parallel vectors are cos 1, sin 0; an odd dimension is padded with a zero."""
    u, v = torch.tensor([[1.0, 0.0], [3.0, 0.0]]), torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    torch.testing.assert_close(pairwise_angle_sim(u, v), torch.tensor([1.0, 1.0]))
    odd = torch.randn(4, 5), torch.randn(4, 5)
    torch.testing.assert_close(pairwise_angle_sim(*odd), pairwise_angle_sim(*(F.pad(x, (0, 1)) for x in odd)))


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="one per pair"):
        cosent_loss(torch.randn(4, 3), torch.randn(4, 3), torch.rand(3), gather=False)
    with pytest.raises(ValueError, match="one shape"):
        angle_loss(torch.randn(4, 3), torch.randn(4, 2), torch.rand(4), gather=False)


@pytest.mark.parametrize("dim", [8, 7])  # an odd dimension: AnglE pads it
def test_matches_sentence_transformers(dim):
    from sentence_transformers.sentence_transformer.losses import AnglELoss, CoSENTLoss, CosineSimilarityLoss

    torch.manual_seed(dim)
    u, v = torch.randn(16, dim), torch.randn(16, dim)
    gold = torch.randint(0, 6, (16,)).float() / 5  # STS-B-like scores, with ties
    theirs = {"cosine": CosineSimilarityLoss(None), "cosent": CoSENTLoss(None), "angle": AnglELoss(None)}
    ours = {"cosine": cosine_similarity_loss(u, v, gold), "cosent": cosent_loss(u, v, gold),
            "angle": angle_loss(u, v, gold)}
    for name, loss in theirs.items():
        torch.testing.assert_close(ours[name], loss.compute_loss_from_embeddings([u, v], gold), **TOL)
    assert theirs["cosent"].scale == theirs["angle"].scale == 20.0  # our default scale is theirs


def test_gradients_match_sentence_transformers():
    from sentence_transformers.sentence_transformer.losses import AnglELoss, CoSENTLoss

    torch.manual_seed(0)
    base = torch.randn(12, 6), torch.randn(12, 6)
    gold = torch.rand(12)
    for ours, theirs in ((cosent_loss, CoSENTLoss(None)), (angle_loss, AnglELoss(None))):
        a = [t.clone().requires_grad_(True) for t in base]
        b = [t.clone().requires_grad_(True) for t in base]
        ours(*a, gold).backward()
        theirs.compute_loss_from_embeddings(b, gold).backward()
        for x, y in zip(a, b, strict=True):
            torch.testing.assert_close(x.grad, y.grad, rtol=1e-5, atol=1e-6)


def test_losses_under_bf16_autocast_are_computed_in_fp32():
    torch.manual_seed(0)
    u, v, gold = torch.randn(8, 32).bfloat16(), torch.randn(8, 32).bfloat16(), torch.rand(8)
    for fn in (cosine_similarity_loss, cosent_loss, angle_loss, angle_full_loss):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got = fn(u, v, gold)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, fn(u.float(), v.float(), gold))


RANKED = (("cosent", cosent_loss), ("angle", angle_loss), ("angle_full", angle_full_loss))  # batch-wide losses


def _rank_grads(rank: int, world: int, init_file: str, u, v, gold, out) -> None:
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        n = u.shape[0] // world
        rows = slice(rank * n, (rank + 1) * n)
        a, b = (t[rows].clone().requires_grad_(True) for t in (u, v))
        losses = {}
        for name, fn in RANKED:
            a.grad = b.grad = None
            loss = fn(a, b, gold[rows])
            loss.backward()
            losses[name] = (loss.detach(), a.grad.clone(), b.grad.clone())
        losses["local"] = cosent_loss(a.detach(), b.detach(), gold[rows], gather=False)
        out[rank] = losses
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow  # 2 spawned DDP ranks: 4-19 s on 2 shared cores
def test_gathered_ranking_loss_matches_single_device(tmp_path):
    """Every rank holds the global-batch loss; the gather's backward sums the ranks' gradients, DDP's average
    (1/2) then gives d(single)/d(own rows). Without the gather each rank would rank its half only."""
    torch.manual_seed(0)
    u, v, gold = torch.randn(8, 5), torch.randn(8, 5), torch.randint(0, 6, (8,)).float() / 5
    out = mp.Manager().dict()
    mp.spawn(_rank_grads, args=(2, str(tmp_path / "init"), u, v, gold, out), nprocs=2)
    for name, fn in RANKED:
        full = [t.clone().requires_grad_(True) for t in (u, v)]
        single = fn(*full, gold)
        single.backward()
        for r in range(2):
            loss, grad_u, grad_v = out[r][name]
            torch.testing.assert_close(loss, single.detach(), rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(grad_u / 2, full[0].grad[r * 4:(r + 1) * 4], rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(grad_v / 2, full[1].grad[r * 4:(r + 1) * 4], rtol=1e-5, atol=1e-6)
    local = [out[r]["local"] for r in range(2)]
    assert all(abs(x.item() - cosent_loss(u, v, gold).item()) > 1e-3 for x in local)  # the gather matters
