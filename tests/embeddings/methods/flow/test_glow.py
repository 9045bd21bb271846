"""The BERT-flow Glow (embeddings.methods.flow.glow, glow_layers): invertibility, exact log-det, init, learning, shape errors."""

from __future__ import annotations

import math

import pytest
import torch

from sts_lightning.embeddings.methods.flow.glow import Glow
from sts_lightning.embeddings.methods.flow.glow_layers import ActNorm
from tests.tolerance import float_tolerance

CONFIGS = [("affine", "lu"), ("affine", "reverse"), ("additive", "lu"), ("additive", "reverse")]


pytestmark = pytest.mark.usefixtures("one_thread")


def _data(n: int, dim: int, dtype=torch.float32) -> torch.Tensor:
    """Correlated, off-centre vectors of unit-ish scale (like pooled BERT features)."""
    mix = torch.randn(dim, dim, dtype=dtype) / dim**0.5
    return torch.randn(n, dim, dtype=dtype) @ mix + torch.linspace(-1, 1, dim, dtype=dtype)


def _trained_looking(flow: Glow, x: torch.Tensor) -> Glow:
    """Run the data-dependent init, then move every parameter off its init so no layer is trivial."""
    flow(x)
    with torch.no_grad():
        for p in flow.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return flow


def glow_tolerance(dtype: torch.dtype) -> float:
    """Forward then inverse of the default Glow: 3 levels x 3 steps, each an ActNorm, a 1x1 map and a coupling
    net of width 32 (its longest sum), so 2 x 9 chained stages each way."""
    return float_tolerance(dtype, reduction=32, depth=36)


@pytest.mark.parametrize(("coupling", "permutation"), CONFIGS)
def test_inverse_of_forward_is_identity(coupling, permutation):
    for dtype in (torch.float32, torch.float64):
        torch.manual_seed(0)
        x = _data(64, 16, dtype)
        flow = _trained_looking(Glow(16, coupling=coupling, permutation=permutation).to(dtype), x)
        z, _ = flow(x)
        assert z.shape == x.shape
        torch.testing.assert_close(flow.inverse(z), x, rtol=0, atol=glow_tolerance(dtype))


@pytest.mark.parametrize(("coupling", "permutation"), CONFIGS)
def test_log_det_equals_autograd_jacobian(coupling, permutation):
    torch.manual_seed(1)
    x = _data(32, 8, torch.float64)
    flow = _trained_looking(Glow(8, coupling=coupling, permutation=permutation).double(), x)
    _, log_det = flow(x[:3])
    for i in range(3):
        jac = torch.autograd.functional.jacobian(lambda v: flow(v[None])[0][0], x[i])
        expected = torch.linalg.slogdet(jac).logabsdet
        torch.testing.assert_close(log_det[i], expected, rtol=0, atol=1e-9)


def test_actnorm_standardises_its_first_training_batch():
    x = _data(128, 6, torch.float64)
    norm = ActNorm(6).double()
    y, log_det = norm(x)
    torch.testing.assert_close(y.mean(0), torch.zeros(6, dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(y.var(0, unbiased=False), torch.ones(6, dtype=torch.float64), rtol=0, atol=1e-5)
    torch.testing.assert_close(log_det, -x.std(0, unbiased=False).log().sum().expand(128), rtol=0, atol=1e-5)
    norm(x * 10 + 5)  # later batches train the parameters, they do not re-initialise them
    torch.testing.assert_close(norm(x)[0], y)


@pytest.mark.parametrize("coupling", ["additive", "affine"])
def test_flow_at_init_is_the_standardised_input(coupling):
    """With the fixed permutation, z at init is standardised x with its channels reordered, each channel
    scaled by 1 (additive: each coupling is exactly the identity) or, on the halves that the last
    coupling of a level touched, by sigmoid(2) (affine: the reference's ``sigmoid(raw + 2)`` with a zero
    net; inside a level the next ActNorm re-standardises it away)."""
    torch.manual_seed(2)
    x = _data(256, 8, torch.float64)
    z, _ = Glow(8, coupling=coupling, permutation="reverse").double()(x)
    x_std = (x - x.mean(0)) / x.std(0, unbiased=False)
    factors = {1.0} if coupling == "additive" else {1.0, torch.sigmoid(torch.tensor(2.0)).item()}
    matched = []
    for j in range(8):
        i = int((z[:, j:j + 1] * x_std).mean(0).abs().argmax())
        ratio = (z[:, j] / x_std[:, i]).median().item()
        assert min(abs(ratio - f) for f in factors) < 1e-4
        torch.testing.assert_close(z[:, j], ratio * x_std[:, i], rtol=0, atol=1e-4)
        matched.append(i)
    assert sorted(matched) == list(range(8))


def test_default_flow_at_init_is_an_affine_map():
    """Zero-initialised coupling nets: no non-linearity until training moves them."""
    torch.manual_seed(3)
    x = _data(64, 16)
    flow = Glow(16)
    flow(x)
    a, b, c = x[:8], x[8:16], x[16:24]
    za, zb, zc = (flow(t)[0] for t in (a, b, c))
    torch.testing.assert_close(flow(a - b + c)[0], za - zb + zc, rtol=0, atol=glow_tolerance(torch.float32))
    log_det = flow(x)[1]
    torch.testing.assert_close(log_det, log_det[:1].expand(64))


def test_nll_decreases_on_correlated_gaussian():
    torch.manual_seed(0)
    cov = torch.tensor([[1.0, 0.9], [0.9, 1.0]]) * 4.0
    x = torch.randn(256, 2) @ torch.linalg.cholesky(cov).T + torch.tensor([3.0, -1.0])
    entropy_bits = 0.5 * torch.logdet(2 * math.pi * math.e * cov).item() / (2 * math.log(2))
    for kwargs in ({}, {"coupling": "additive", "permutation": "reverse"}):
        flow = Glow(2, levels=1, **kwargs)
        opt = torch.optim.Adam(flow.parameters(), lr=1e-2)
        history = []
        for _ in range(50):
            loss = flow.nll(x).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            history.append(loss.item())
        assert history[-1] < history[0] - 0.05, (kwargs, history[0], history[-1])
    # The default flow (learned rotation) reaches the data's entropy per dimension, in bits.
    flow = Glow(2, levels=1)
    opt = torch.optim.Adam(flow.parameters(), lr=1e-2)
    for _ in range(50):
        loss = flow.nll(x).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert abs(flow.nll(x).mean().item() - entropy_bits) < 0.1


def test_nll_is_bits_per_dimension():
    torch.manual_seed(4)
    x = _data(16, 8)
    flow = Glow(8)
    z, log_det = flow(x)
    log_p = log_det - 0.5 * (z**2).sum(-1) - 4 * math.log(2 * math.pi)
    torch.testing.assert_close(flow.nll(x), -log_p / (8 * math.log(2)))


def test_dim_the_levels_cannot_split_is_a_clear_error():
    with pytest.raises(ValueError, match=r"dim=12 cannot be split by 3 levels.*2\*\*levels=8"):
        Glow(12)
    Glow(12, levels=2)  # 12 -> 6 -> 3 + 3: fine with two levels
    with pytest.raises(ValueError, match="coupling"):
        Glow(8, coupling="spline")
    with pytest.raises(ValueError, match=r"expected a \(batch, 8\)"):
        Glow(8)(torch.zeros(4, 16))


def test_init_state_and_checkpoint_round_trip():
    torch.manual_seed(5)
    x = _data(32, 8)
    flow = Glow(8)
    with pytest.raises(RuntimeError, match="data-dependent init"):
        flow.inverse(x)
    flow.eval()
    flow(x)  # an eval pass (e.g. Lightning's sanity check) must not consume the init
    assert not flow.initialized
    flow.train()
    z, _ = flow(x)
    assert flow.initialized
    restored = Glow(8)
    restored.load_state_dict(flow.state_dict())
    assert restored.initialized
    torch.testing.assert_close(restored(x)[0], z)
