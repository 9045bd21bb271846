"""Sen2Pro's MC dropout: sparse dropout has torch's dropout distribution, the context patches and restores."""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.methods.pooling import get_pooling
from sts_lightning.embeddings.methods.sen2pro.mc_dropout import drop_positions, mc_dropout, sparse_dropout
from sts_lightning.embeddings.methods.sen2pro.scorer import RunningMoments, Sen2ProScorer, banded_moments

SENTENCES = ["a man plays a guitar .", "a woman cuts an onion .", "a dog runs in the park .", "dog"]


@pytest.mark.parametrize("chunk", [None, 1])  # 1: one geometric draw per chunk, the refill loop every time
def test_drop_positions_is_a_bernoulli_process(chunk):
    torch.manual_seed(0)
    n, p, reps = 7, 0.3, 3000
    hits = torch.zeros(reps, n)
    for r in range(reps):
        pos = drop_positions(n, p, chunk=chunk)
        assert bool((pos[1:] > pos[:-1]).all()) and (len(pos) == 0 or 0 <= int(pos[0]) and int(pos[-1]) < n)
        hits[r, pos] = 1
    sd = (p * (1 - p) / reps) ** 0.5
    assert bool(((hits.mean(0) - p).abs() < 4.5 * sd).all())  # every position dropped with probability p
    both = (hits[:, 2] * hits[:, 3]).mean()  # neighbours independent (the gaps do not couple them)
    assert abs(float(both) - p * p) < 4.5 * (p * p * (1 - p * p) / reps) ** 0.5


def test_drop_positions_edge_cases_and_large_n():
    assert drop_positions(0, 0.5).numel() == 0 and drop_positions(10, 0.0).numel() == 0
    assert torch.equal(drop_positions(5, 1.0), torch.arange(5))
    with pytest.raises(ValueError):
        drop_positions(5, 1.5)
    torch.manual_seed(1)
    n, p = 200_000, 0.1
    pos = drop_positions(n, p)
    assert abs(len(pos) - n * p) < 5 * (n * p * (1 - p)) ** 0.5
    assert abs(int((pos < n // 2).sum()) - len(pos) / 2) < 5 * (len(pos) / 4) ** 0.5


def test_sparse_dropout_values_and_input_untouched():
    torch.manual_seed(0)
    x = torch.randn(40, 50).t()  # not contiguous
    before = x.clone()
    y = sparse_dropout(x, 0.25)
    assert torch.equal(x, before) and y.shape == x.shape and y.dtype == x.dtype
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] / 0.75)
    assert 0.15 < 1 - kept.float().mean().item() < 0.35
    torch.manual_seed(3)
    a = sparse_dropout(x, 0.25)
    torch.manual_seed(3)
    assert torch.equal(a, sparse_dropout(x, 0.25))  # torch's generator: seeded like torch's dropout
    assert torch.equal(sparse_dropout(x, 0.0), x) and not sparse_dropout(x, 1.0).any()


def test_context_patches_every_dropout_and_restores(tiny_encoder):
    model = tiny_encoder.model
    dropouts = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    assert len(dropouts) >= 5  # embeddings + per layer attention probs and both residual branches
    pool = get_pooling("mean")
    with pytest.raises(RuntimeError), mc_dropout(tiny_encoder):
        assert model.training and all("forward" in m.__dict__ for m in dropouts)
        a = tiny_encoder.encode(SENTENCES, pool)
        assert not torch.equal(a, tiny_encoder.encode(SENTENCES, pool))
        dropouts[0].eval()  # a module in eval mode stays the identity, as nn.Dropout
        assert torch.equal(dropouts[0](a), a)
        raise RuntimeError("restored also after an error")
    assert not model.training and not any("forward" in m.__dict__ for m in dropouts)
    with mc_dropout(tiny_encoder, fast=False):
        assert model.training and not any("forward" in m.__dict__ for m in dropouts)


def test_fast_mc_dropout_has_the_distribution_of_torch_dropout(tiny_encoder, one_thread):
    """Many passes of the tiny BERT: per-dimension mean and variance agree with torch's own dropout."""
    pool, passes = get_pooling("first_last_avg"), 150
    samples = {}
    for fast in (True, False):
        torch.manual_seed(0)
        with mc_dropout(tiny_encoder, fast=fast):
            samples[fast] = torch.stack([tiny_encoder.encode(SENTENCES[:2], pool) for _ in range(passes)]).double()
    (m1, v1), (m0, v0) = [(s.mean(0), s.var(0)) for s in (samples[True], samples[False])]
    z = (m1 - m0) / ((v1 + v0) / passes).sqrt()
    assert z.abs().max() < 5
    assert 0.85 < float((v1 / v0).mean()) < 1.18


def test_running_moments_equal_banded_moments():
    torch.manual_seed(0)
    samples = 1e3 + 1e-3 * torch.randn(9, 4, 6, dtype=torch.float64)  # small variance on a large offset
    acc = RunningMoments()
    for x in samples:
        acc.add(x)
    mu, var = acc.result()
    torch.testing.assert_close(mu, samples.mean(0).float())
    torch.testing.assert_close(var, samples.var(0, unbiased=False).float(), rtol=1e-6, atol=0)
    bmu, bvar = banded_moments(samples)
    torch.testing.assert_close((mu, var), (bmu, bvar), rtol=1e-6, atol=0)


def test_each_distinct_sentence_and_copy_is_encoded_once_per_pass(tiny_encoder):
    rows: list[int] = []
    forward = tiny_encoder.forward_ids
    tiny_encoder.forward_ids = lambda ids: rows.append(len(ids)) or forward(ids)
    sentences = SENTENCES + SENTENCES[:2]  # duplicates
    scorer = Sen2ProScorer(tiny_encoder, n_samples=3, uncertainty="model")
    scorer.represent(sentences)
    assert sum(rows) == 3 * len(SENTENCES)
    rows.clear()
    scorer = Sen2ProScorer(tiny_encoder, n_samples=6, uncertainty="data", ops=("swap",))
    rep = scorer.represent(["a b", "b a", "dog"])  # every copy of "a b" is "b a" and back; "dog" stays "dog"
    assert sum(rows) == 3  # 18 copies, 3 distinct strings, one encode call
    assert scorer.last_stats["augmented copies"] == "3 distinct of 18" and set(scorer.last_seconds) == {"data"}
    plain = tiny_encoder.encode(["b a", "a b", "dog"], get_pooling("first_last_avg"))
    torch.testing.assert_close(rep["mean"], plain)
    assert not rep["var"].any()


def test_sparse_dropout_attention_is_the_math_attention_with_those_drops(one_thread):
    from sts_lightning.embeddings.methods.sen2pro.mc_dropout import drop_positions, sparse_dropout_attention

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    mask = torch.ones(2, 1, 5, 5, dtype=torch.bool)
    mask[1, :, :, 3:] = False  # the second sentence has 3 tokens
    module = torch.nn.Module()
    torch.manual_seed(7)
    out, _ = sparse_dropout_attention(module, q, k, v, mask, dropout=0.2, scaling=0.5)
    torch.manual_seed(7)
    dropped = drop_positions(2 * 3 * 5 * 5, 0.2)
    probs = torch.softmax((q @ k.transpose(-1, -2) * 0.5).masked_fill(~mask, float("-inf")), dim=-1) / 0.8
    probs.view(-1)[dropped] = 0.0
    torch.testing.assert_close(out, (probs @ v).transpose(1, 2))
    # no dropout: exactly transformers' sdpa attention
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.5).transpose(1, 2)
    torch.testing.assert_close(sparse_dropout_attention(module, q, k, v, mask, dropout=0.0, scaling=0.5)[0], sdpa)


def test_context_switches_sdpa_attention_and_restores(tiny_encoder):
    from sts_lightning.embeddings.methods.sen2pro.mc_dropout import SPARSE_SDPA

    config = tiny_encoder.model.config
    assert config._attn_implementation == "sdpa"
    with mc_dropout(tiny_encoder):
        assert config._attn_implementation == SPARSE_SDPA
        a = tiny_encoder.encode(SENTENCES, get_pooling("mean"))  # padded batch through the custom attention
        assert bool(torch.isfinite(a).all())
    assert config._attn_implementation == "sdpa"
    with mc_dropout(tiny_encoder, fast=False):
        assert config._attn_implementation == "sdpa"
