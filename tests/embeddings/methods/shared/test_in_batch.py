"""The shared in-batch loss (embeddings.methods.shared.in_batch): by hand, against sentence-transformers'
MultipleNegativesRankingLoss / ContrastiveTensionLossInBatchNegatives, and under a 2-rank gloo group the
gathered loss gives the single-device gradient of the global batch."""

from __future__ import annotations

import math

import pytest
import torch
import torch.multiprocessing as mp

from sts_lightning.embeddings.methods.ct.objective import in_batch_tension_loss
from sts_lightning.embeddings.methods.shared.in_batch import multiple_negatives_ranking_loss
from tests.helpers import WORDS
from tests.tolerance import TINY_BERT, tolerance_kwargs

SENTENCES = [f"{a} {b} {c} ." for a, b, c in zip(WORDS[::3], WORDS[1::3], WORDS[2::3], strict=False)]


def test_mnrl_by_hand():
    anchors = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    positives = torch.tensor([[3.0, 0.0], [1.0, 1.0]])
    negatives = torch.tensor([[0.0, -1.0], [-1.0, 0.0]])
    s = 1 / math.sqrt(2)
    cos = [[1.0, s, 0.0, -1.0], [0.0, s, -1.0, 0.0]]  # anchor i vs [p0, p1, n0, n1]
    by_hand = 0.0
    for i in range(2):
        logits = [20 * c for c in cos[i]]
        by_hand += -(logits[i] - math.log(sum(math.exp(v) for v in logits))) / 2
    assert multiple_negatives_ranking_loss(anchors, positives, negatives).item() == pytest.approx(by_hand, rel=1e-5)
    # without hard negatives the candidates are the positives only
    no_neg = sum(-(20 * cos[i][i] - math.log(sum(math.exp(20 * v) for v in cos[i][:2]))) for i in range(2)) / 2
    assert multiple_negatives_ranking_loss(anchors, positives).item() == pytest.approx(no_neg, rel=1e-5)
    with pytest.raises(ValueError, match="differ in shape"):
        multiple_negatives_ranking_loss(anchors, positives[:1])


def _embed(model, sentences):
    return model(model.preprocess(sentences))["sentence_embedding"]


def test_matches_sentence_transformers(st_model):
    from sentence_transformers.sentence_transformer.losses import (
        ContrastiveTensionLossInBatchNegatives,
        MultipleNegativesRankingLoss,
    )

    a, p, n = SENTENCES[:4], SENTENCES[4:8], SENTENCES[8:12]
    with torch.no_grad():
        theirs = MultipleNegativesRankingLoss(st_model)([st_model.preprocess(x) for x in (a, p, n)], None)
        ours = multiple_negatives_ranking_loss(_embed(st_model, a), _embed(st_model, p), _embed(st_model, n))
        torch.testing.assert_close(ours, theirs, **TINY_BERT)
        # before any step model 1 is a copy of model 2, so st_model stands for both
        ct = ContrastiveTensionLossInBatchNegatives(st_model)
        f = st_model.preprocess(a)
        their_ct = ct([f, st_model.preprocess(a)], None)
        ours_ct = in_batch_tension_loss(_embed(st_model, a), _embed(st_model, a))
        torch.testing.assert_close(ours_ct, their_ct, **TINY_BERT)


# 16 candidates a softmax sums over; gather, cosine, cross-entropy and its backward chained.
GATHERED = tolerance_kwargs(torch.float32, reduction=16, depth=3)


def _rank_grads(rank: int, world: int, init_file: str, anchors, positives, negatives, out) -> None:
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        n = anchors.shape[0] // world
        rows = slice(rank * n, (rank + 1) * n)
        a, p, q = (t[rows].clone().requires_grad_(True) for t in (anchors, positives, negatives))
        loss = multiple_negatives_ranking_loss(a, p, q)
        loss.backward()
        # what DDP does to parameter gradients: average over ranks (here the inputs stand for parameters)
        grads = [g.clone() for g in (a.grad, p.grad, q.grad)]
        out[rank] = (loss.detach(), grads)
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow  # 2 spawned DDP ranks: 4-17 s on 2 shared cores
def test_gathered_loss_matches_single_device(tmp_path):
    torch.manual_seed(0)
    anchors, positives, negatives = torch.randn(8, 5), torch.randn(8, 5), torch.randn(8, 5)
    full = [t.clone().requires_grad_(True) for t in (anchors, positives, negatives)]
    single = multiple_negatives_ranking_loss(*full)
    single.backward()

    out = mp.Manager().dict()
    mp.spawn(_rank_grads, args=(2, str(tmp_path / "init"), anchors, positives, negatives, out), nprocs=2)
    losses = [out[r][0] for r in range(2)]
    torch.testing.assert_close(sum(losses) / 2, single.detach(), **GATHERED)
    # each rank's own rows: the gathered backward sums the gradients of both ranks' losses; DDP's
    # average (1/2) then matches d(single)/d(rows), single being the mean over all 8 anchors
    for r in range(2):
        for got, want in zip(out[r][1], (t.grad[r * 4:(r + 1) * 4] for t in full), strict=True):
            torch.testing.assert_close(got / 2, want, **GATHERED)
