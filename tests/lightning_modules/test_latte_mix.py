"""Token VAEs (lightning_modules.latte_mix): every latent trains, logs its KL diagnostics, stops on NaN,
exports and reloads to a scorer that scores identically, and the warm-up-then-decay schedule."""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.latte_mix.nets import load_token_vae
from sts_lightning.lightning_modules.latte_mix import LatteMixModule
from sts_lightning.lightning_modules.optimizers import triangle_lambda
from tests.helpers import WORDS
from tests.tolerance import TINY_BERT

SENTENCES = [" ".join(WORDS[i:i + 5]) for i in range(0, 30, 3)]


def module(tiny_model_dir, latent: str, **kwargs) -> LatteMixModule:
    m = LatteMixModule(str(tiny_model_dir), latent=latent, latent_dim=4, num_classes=5, hidden_dim=16,
                       max_length=16, eval_batch_size=4, **kwargs)
    m.log = lambda *args, **kw: None  # no trainer attached
    return m


def batch(dim: int, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    features = torch.randn(2, 6, dim, generator=g)
    features[~mask] = float("nan")  # padding must never reach the VAE
    return {"features": features, "mask": mask}


@pytest.mark.parametrize("latent", ["categorical", "normal", "ae"])
def test_each_latent_trains_and_reports_its_terms(tiny_model_dir, latent):
    m = module(tiny_model_dir, latent)
    b = batch(m.hparams.input_dim)
    terms = m.losses(b["features"], b["mask"])
    assert torch.isfinite(terms["loss"]) and terms["recon"] > 0
    if latent == "ae":
        assert "kl_raw" not in terms
    else:
        assert {"kl_raw", "kl_thresholded", "active_units", "beta"} <= set(terms)
        assert terms["kl_thresholded"] >= 0.3 * 4 - 1e-6  # free bits: every unit costs at least the threshold
        assert float(terms["beta"]) == 0.0  # annealing starts at beta_start
    if latent == "categorical":
        assert 1.0 <= float(terms["class_perplexity"]) <= 5.0
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    first = m.training_step(b, 0)
    for _ in range(30):
        opt.zero_grad()
        loss = m.training_step(b, 0)
        loss.backward()
        opt.step()
    assert m.losses(b["features"], b["mask"])["recon"] < first.detach() or latent == "categorical"


def test_nan_loss_stops_with_a_clear_message(tiny_model_dir):
    m = module(tiny_model_dir, "normal")
    b = batch(m.hparams.input_dim)
    b["features"][0, 0, 0] = float("nan")  # a real token
    with pytest.raises(Exception, match="(?i)nan|finite"):
        m.training_step(b, 0)


def test_bad_combinations_and_options(tiny_model_dir):
    with pytest.raises(ConfigError, match="categorical: cosine"):
        module(tiny_model_dir, "normal", distance="js")
    with pytest.raises(ConfigError, match="unknown token VAE latent"):
        module(tiny_model_dir, "dirichlet")
    with pytest.raises(ConfigError, match="tau"):
        module(tiny_model_dir, "categorical", tau=0.0)


def test_schedule_warms_up_from_min_lr_and_decays_back():
    f = triangle_lambda(1e-3, 2e-5, warmup=10, total=110)
    assert f(0) == pytest.approx(0.02) and f(10) == pytest.approx(1.0)
    assert f(60) == pytest.approx((1 + 0.02) / 2) and f(110) == pytest.approx(0.02) and f(500) == pytest.approx(0.02)


@pytest.mark.parametrize("latent,distance", [("categorical", "js"), ("normal", "l2"), ("ae", "cosine")])
def test_export_reloads_to_an_identical_scorer(tiny_model_dir, tmp_path, latent, distance):
    from sts_lightning.embeddings.methods.latte_mix.scorer import load_token_vae_scorer

    m = module(tiny_model_dir, latent, distance=distance).eval()
    torch.manual_seed(0)
    for p in m.parameters():
        p.data.normal_()
    m.export(tmp_path / "export")
    posterior, _, config = load_token_vae(tmp_path / "export")
    assert config["latent"] == latent and config["model_name_or_path"] == str(tiny_model_dir)
    live = m.scorer().score_pairs(SENTENCES[:5], SENTENCES[5:])
    loaded = load_token_vae_scorer(tmp_path / "export").score_pairs(SENTENCES[:5], SENTENCES[5:])
    torch.testing.assert_close(loaded, live, **TINY_BERT)
