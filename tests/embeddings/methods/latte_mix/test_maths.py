"""Latte-Mix maths (Gumbel-Softmax, KL terms, free bits, mixtures, distances) and the scorer end to end."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.latte_mix.maths import (
    categorical_kl_uniform,
    class_usage,
    gaussian_kl_standard,
    gaussian_mixture_l2,
    gaussian_mixture_log_cosine,
    gaussian_mixture_log_l2,
    gumbel_softmax,
    mixture_cosine,
    mixture_js_divergence,
    mixture_l2_distance,
    thresholded_kl,
    token_mixture,
)
from sts_lightning.embeddings.methods.latte_mix.scorer import LatteMixScorer, check_combination
from tests.helpers import TinyPosterior

pytestmark = pytest.mark.usefixtures("one_thread")

# ---------------------------------------------------------------- Gumbel-Softmax and KL terms


def test_gumbel_softmax_rows_sum_to_one_and_sharpen_with_small_tau():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(500, 3, 6, generator=gen)
    soft = gumbel_softmax(logits, tau=1.0, generator=gen)
    assert soft.shape == logits.shape and torch.allclose(soft.sum(-1), torch.ones(500, 3), atol=1e-5)
    hard = gumbel_softmax(logits, tau=0.01, generator=gen)
    assert hard.max(-1).values.mean() > 0.98 and soft.max(-1).values.mean() < 0.9


def test_gumbel_softmax_argmax_frequencies_match_the_categorical():
    gen = torch.Generator().manual_seed(1)
    logits = torch.tensor([1.0, 0.0, -1.0, 2.0]) + 7.0  # unnormalised: the shift must not matter
    samples = gumbel_softmax(logits.expand(40000, 4), tau=0.5, generator=gen)
    freq = torch.bincount(samples.argmax(-1), minlength=4).float() / 40000
    assert torch.allclose(freq, torch.softmax(logits, -1), atol=0.01)


def test_gumbel_softmax_is_reproducible_with_a_generator():
    logits = torch.randn(4, 5)
    a = gumbel_softmax(logits, 0.3, torch.Generator().manual_seed(3))
    b = gumbel_softmax(logits, 0.3, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)


def test_categorical_kl_against_hand_computed_values():
    p = 0.8  # K=2 with probabilities (0.8, 0.2)
    logits = torch.tensor([[math.log(p), math.log(1 - p)], [0.0, 0.0]])
    expected = p * math.log(p) + (1 - p) * math.log(1 - p) + math.log(2)
    assert torch.allclose(categorical_kl_uniform(logits), torch.tensor([expected, 0.0]), atol=1e-6)
    peaked = categorical_kl_uniform(torch.tensor([[100.0, 0, 0, 0, 0]]))  # one-hot: KL = log K, finite
    assert torch.allclose(peaked, torch.tensor([math.log(5)]), atol=1e-5)


def test_gaussian_kl_against_hand_computed_values():
    mu = torch.tensor([1.0, 0.0, 0.0])
    logvar = torch.tensor([0.0, 0.0, math.log(2.0)])
    expected = torch.tensor([0.5, 0.0, 0.5 * (2.0 - 1.0 - math.log(2.0))])
    assert torch.allclose(gaussian_kl_standard(mu, logvar), expected, atol=1e-6)


def test_thresholded_kl_value_gradient_and_mask():
    kl = torch.zeros(2, 3, 3)
    kl[..., 0], kl[..., 1], kl[..., 2] = 1.0, 0.1, 0.0
    kl[1, 2] = float("nan")  # padding: must not count, not even as nan
    kl.requires_grad_(True)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    loss, stats = thresholded_kl(kl, mask, threshold=0.3)
    assert loss.item() == pytest.approx(1.0 + 0.3 + 0.3)
    assert stats["kl_raw"].item() == pytest.approx(1.1) and stats["active_units"].item() == 2
    assert stats["frac_below_threshold"].item() == pytest.approx(2 / 3)
    loss.backward()
    assert torch.allclose(kl.grad[..., 0][mask], torch.full((5,), 1 / 5))  # the unit above the threshold
    assert kl.grad[..., 1:].abs().sum() == 0 and kl.grad[1, 2].abs().sum() == 0
    plain, _ = thresholded_kl(kl.detach(), mask, threshold=0.0)
    assert plain.item() == pytest.approx(1.1)


def test_class_usage_perplexity():
    mask = torch.ones(2, 4, dtype=torch.bool)
    one_class = torch.zeros(2, 4, 3, 5)
    one_class[..., 2] = 1.0
    assert class_usage(one_class, mask).item() == pytest.approx(1.0)
    one_class[1, 3], mask[1, 3] = math.nan, False  # padding is ignored
    assert class_usage(one_class, mask).item() == pytest.approx(1.0)
    mask[1, 3] = True
    assert class_usage(torch.full((2, 4, 3, 5), 0.2), mask).item() == pytest.approx(5.0)
    spread = torch.eye(5).repeat(2, 1)[:8].view(2, 4, 1, 5).expand(2, 4, 3, 5)  # classes 0-4 then 0-2
    freq = torch.tensor([2, 2, 2, 1, 1]) / 8
    assert class_usage(spread, mask).item() == pytest.approx(math.exp(-(freq * freq.log()).sum().item()))


# ---------------------------------------------------------------- mixtures and distances


def test_token_mixture_excludes_padding_and_rejects_empty_rows():
    x = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]], [[5.0, 6.0], [math.inf, 9.0], [math.nan, 9.0]]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert torch.equal(token_mixture(x, mask), torch.tensor([[2.0, 3.0], [5.0, 6.0]]))
    assert token_mixture(torch.ones(2, 3, 4, 5), mask).shape == (2, 4, 5)
    with pytest.raises(ValueError, match="no real tokens"):
        token_mixture(x, torch.tensor([[1, 0, 0], [0, 0, 0]]))


def random_mixtures(n: int, d: int, k: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.softmax(3 * torch.randn(n, d, k, generator=gen), -1)


def test_js_symmetric_zero_bounded_and_matches_scipy():
    a, b = random_mixtures(6, 4, 7, 0), random_mixtures(6, 4, 7, 1)
    a[0, 0] = torch.tensor([1.0, 0, 0, 0, 0, 0, 0])  # zeros: 0 log 0 must be 0
    b[0, 0] = torch.tensor([0, 1.0, 0, 0, 0, 0, 0])
    js = mixture_js_divergence(a, b)  # the divergence itself: >= 0, as the name says
    assert torch.allclose(js, mixture_js_divergence(b, a)) and torch.all(js >= 0)
    assert torch.all(js <= 4 * math.log(2) + 1e-6)
    assert torch.allclose(mixture_js_divergence(a, a), torch.zeros(6), atol=1e-6)
    ref = [sum(jensenshannon(a[i, v].double().numpy(), b[i, v].double().numpy()) ** 2 for v in range(4))
           for i in range(6)]
    assert np.allclose(js.numpy(), ref, atol=1e-5)
    assert js[0] > 0 and math.log(2) <= js[0].item()  # a disjoint variable contributes exactly log 2


def test_cosine_and_l2_of_mixtures():
    a, b = random_mixtures(5, 3, 4, 2), random_mixtures(5, 3, 4, 3)
    assert torch.allclose(mixture_cosine(a, a), torch.ones(5)) and torch.all(mixture_cosine(a, b) < 1)
    assert torch.allclose(mixture_l2_distance(a, b), (a - b).flatten(1).norm(dim=1))
    assert torch.all(mixture_l2_distance(a, a) == 0)


def density(x: torch.Tensor, mu: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """Equal-weight diagonal Gaussian mixture density at points ``x`` (m, Dz), float64."""
    d = torch.distributions.Normal(mu.double(), var.double().sqrt())
    return d.log_prob(x[:, None, :]).sum(-1).exp().mean(1)


def test_gaussian_mixture_l2_matches_numerical_integration():
    gen = torch.Generator().manual_seed(0)
    mu = torch.randn(2, 3, 2, generator=gen)
    var = 0.2 + torch.rand(2, 3, 2, generator=gen)
    mask_a = torch.tensor([[1, 1, 1], [1, 1, 1]], dtype=torch.bool)
    mask_b = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=torch.bool)
    mu_b, var_b = mu.flip(0) + 0.5, var.flip(0)
    got = -gaussian_mixture_l2(mu, var, mask_a, mu_b, var_b, mask_b, scale="linear")
    grid = torch.linspace(-9, 9, 721, dtype=torch.float64)
    xy = torch.cartesian_prod(grid, grid)
    cell = (grid[1] - grid[0]) ** 2
    for i in range(2):
        p = density(xy, mu[i], var[i])
        q = density(xy, mu_b[i][mask_b[i]], var_b[i][mask_b[i]])
        ref = ((p - q) ** 2).sum().mul(cell).sqrt()
        assert got[i].item() == pytest.approx(ref.item(), rel=0.01)


def test_gaussian_mixture_l2_log_space_matches_direct_formula_and_survives_high_dimension():
    gen = torch.Generator().manual_seed(4)
    mu, mu_b = torch.randn(3, 4, 40, generator=gen).double(), torch.randn(3, 4, 40, generator=gen).double()
    var, var_b = 0.5 + torch.rand(3, 4, 40, generator=gen).double(), 0.5 + torch.rand(3, 4, 40, generator=gen).double()
    mask = torch.ones(3, 4, dtype=torch.bool)

    def cross(m1, v1, m2, v2):  # direct, exponentiated: fine in 40 dims
        cov = v1[:, :, None] + v2[:, None]
        logn = -0.5 * (40 * math.log(2 * math.pi) + cov.log().sum(-1) + ((m1[:, :, None] - m2[:, None]) ** 2 / cov).sum(-1))
        return logn.exp().mean((1, 2))

    direct = (cross(mu, var, mu, var) - 2 * cross(mu, var, mu_b, var_b) + cross(mu_b, var_b, mu_b, var_b)).sqrt()
    assert torch.allclose(gaussian_mixture_log_l2(mu, var, mask, mu_b, var_b, mask).exp(), direct, rtol=1e-6)
    # 768 dims: N(0, I)-like tokens give int p^2 ~ e^-972 and sharp ones e^+hundreds; still finite, ranked.
    base, ones = torch.randn(3, 5, 768, generator=gen), torch.ones(3, 5)
    for var, sign in ((1.0, -1), (1e-3, 1)):
        v = torch.full((3, 5, 768), var)
        shifted = base + 0.01 * math.sqrt(var) * torch.arange(3.0)[:, None, None]  # row 0 unshifted
        log_l2 = gaussian_mixture_log_l2(base, v, ones, shifted, v, ones)
        assert log_l2[0] == -math.inf and torch.isfinite(log_l2[1:]).all() and (sign * log_l2[1:]).min() > 80
        sim = gaussian_mixture_l2(base, v, ones, shifted, v, ones)
        assert torch.isfinite(sim).all() and sim[0] > sim[1] > sim[2]  # "auto" fell back to the log scale
        assert torch.allclose(sim[1:].double(), -log_l2[1:], rtol=1e-6)


def test_gaussian_mixture_l2_identical_is_maximal_and_padding_is_ignored():
    gen = torch.Generator().manual_seed(5)
    mu, var = torch.randn(4, 3, 2, generator=gen), 0.5 + torch.rand(4, 3, 2, generator=gen)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    same = gaussian_mixture_l2(mu, var, mask, mu, var, mask)
    assert torch.all(same == 0)
    junk_mu, junk_var = mu.clone(), var.clone()
    junk_mu[~mask], junk_var[~mask] = 1e6, 1e-9
    assert torch.all(gaussian_mixture_l2(mu, var, mask, junk_mu, junk_var, mask) == 0)
    assert torch.all(gaussian_mixture_l2(mu, var, mask, mu.roll(1, 0), var.roll(1, 0), mask.roll(1, 0)) < 0)
    with pytest.raises(ValueError, match="scale"):
        gaussian_mixture_l2(mu, var, mask, mu, var, mask, scale="cubic")


# ---------------------------------------------------------------- the scorer end to end


SENTS = ["a man plays a guitar .", "a dog runs in the park .", "two cats eat food in the big red house .", "dog"]
COMBOS = [("categorical", "cosine"), ("categorical", "js"), ("categorical", "l2"), ("normal", "l2"), ("ae", "cosine")]


@pytest.mark.parametrize(("latent", "distance"), COMBOS)
def test_scorer_end_to_end(tiny_encoder, latent, distance):
    post = TinyPosterior(latent).train()
    scorer = LatteMixScorer(tiny_encoder, post, layer=-1, latent=latent, distance=distance, batch_size=2)
    rep = scorer.represent(SENTS)
    assert post.training  # the caller's mode is restored (eval inside: dropout off)
    width = max(len(x) for x in tiny_encoder.tokenize(SENTS))
    shapes = {"categorical": {"mixture": (4, 3, 5)}, "normal": {"mu": (4, width, 4), "var": (4, width, 4),
              "mask": (4, width)}, "ae": {"embedding": (4, 4)}}[latent]
    assert {k: tuple(v.shape) for k, v in rep.items()} == shapes
    if latent == "categorical":
        assert torch.allclose(rep["mixture"].sum(-1), torch.ones(4, 3), atol=1e-5)
    if latent == "normal":
        assert rep["mask"].dtype == torch.bool and rep["mask"].sum(1).tolist() == [len(x) for x in tiny_encoder.tokenize(SENTS)]
    alone = scorer.represent([SENTS[3]])  # batch composition and padding must not change a sentence
    for key, value in alone.items():
        ref = rep[key][3][: value.shape[1]] if latent == "normal" else rep[key][3]
        assert torch.allclose(value[0].float(), ref.float(), atol=1e-5)
    sims = scorer.score_pairs([SENTS[0], SENTS[0], SENTS[1], SENTS[2]], [SENTS[0], SENTS[1], SENTS[2], SENTS[3]])
    assert sims.shape == (4,) and sims.dtype == torch.float32 and torch.isfinite(sims).all()
    assert sims[0] >= sims[1:].max()
    top = {"cosine": 1.0, "js": 0.0, "l2": 0.0}[distance]
    assert sims[0].item() == pytest.approx(top, abs=1e-5) and scorer.name == f"latte-mix-{latent}-{distance}"


def test_scorer_layer_and_tau(tiny_encoder):
    post = TinyPosterior("categorical")
    first = LatteMixScorer(tiny_encoder, post, layer=0).represent(SENTS)["mixture"]
    last = LatteMixScorer(tiny_encoder, post, layer=-1).represent(SENTS)["mixture"]
    assert not torch.allclose(first, last)
    sharp = LatteMixScorer(tiny_encoder, post, tau=0.05).represent(["dog"])["mixture"]  # 3 tokens: [CLS] dog [SEP]
    flat = LatteMixScorer(tiny_encoder, post, tau=10.0).represent(["dog"])["mixture"]
    assert sharp.max() > flat.max()


@pytest.mark.parametrize(("latent", "distance", "match"), [
    ("normal", "js", "normal: l2"), ("ae", "js", "ae: cosine"), ("normal", "js", "categorical: cosine/js/l2"),
    ("ae", "l2", "valid combinations"), ("gamma", None, "unknown latte-mix latent"),
])
def test_scorer_rejects_bad_combinations(tiny_encoder, latent, distance, match):
    with pytest.raises(ConfigError, match=match):
        LatteMixScorer(tiny_encoder, TinyPosterior("ae"), latent=latent, distance=distance)
    with pytest.raises(ConfigError, match=match):
        check_combination(latent, distance)


def test_default_distances():
    assert [check_combination(latent) for latent in ("categorical", "normal", "ae")] == ["cosine", "l2", "cosine"]
    assert check_combination("normal", "cosine") == "cosine"


def test_gaussian_mixture_log_cosine_matches_numerical_integration():
    """log( int pq / sqrt(int p^2 int q^2) ) on a 2-D grid; 0 for identical mixtures, symmetric."""
    gen = torch.Generator().manual_seed(1)
    mu = torch.randn(2, 3, 2, generator=gen)
    var = 0.2 + torch.rand(2, 3, 2, generator=gen)
    mask_a = torch.ones(2, 3, dtype=torch.bool)
    mask_b = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=torch.bool)
    mu_b, var_b = mu.flip(0) + 0.5, var.flip(0)
    got = gaussian_mixture_log_cosine(mu, var, mask_a, mu_b, var_b, mask_b)
    grid = torch.linspace(-9, 9, 721, dtype=torch.float64)
    xy = torch.cartesian_prod(grid, grid)
    for i in range(2):
        p = density(xy, mu[i], var[i])
        q = density(xy, mu_b[i][mask_b[i]], var_b[i][mask_b[i]])
        ref = torch.log((p * q).sum() / ((p * p).sum() * (q * q).sum()).sqrt())
        assert got[i].item() == pytest.approx(ref.item(), abs=0.01)
    assert torch.all(got < 0)
    assert torch.allclose(gaussian_mixture_log_cosine(mu, var, mask_a, mu, var, mask_a), torch.zeros(2), atol=1e-6)
    back = gaussian_mixture_log_cosine(mu_b, var_b, mask_b, mu, var, mask_a)
    assert torch.allclose(got, back, atol=1e-6)


@pytest.mark.parametrize("kwargs", [{"tau": 0}, {"tau": True}, {"layer": 3}, {"layer": -4}, {"layer": 1.0}])
def test_scorer_rejects_bad_options(tiny_encoder, kwargs):
    with pytest.raises(ConfigError):
        LatteMixScorer(tiny_encoder, TinyPosterior("categorical"), **kwargs)


def test_scorer_reports_a_posterior_with_the_wrong_interface(tiny_encoder):
    scorer = LatteMixScorer(tiny_encoder, TinyPosterior("ae"), latent="categorical")
    with pytest.raises(ValueError, match="'logits' of 3 dims"):
        scorer.represent(SENTS)
