"""The token VAEs' objective (embeddings.methods.latte_mix.objective): beta's annealing, and the terms each
latent reports (the training through the module: tests/lightning_modules/test_latte_mix.py)."""

from __future__ import annotations

import math

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.latte_mix.nets import build_nets
from sts_lightning.embeddings.methods.latte_mix.objective import annealed_beta, token_vae_losses


def test_beta_ramps_linearly_over_its_share_of_the_steps_then_stays():
    assert annealed_beta(0, 100, 0.0, 1.0, 0.5) == 0.0
    assert annealed_beta(25, 100, 0.0, 1.0, 0.5) == pytest.approx(0.5)
    assert annealed_beta(80, 100, 0.0, 1.0, 0.5) == 1.0
    assert annealed_beta(1, 0, 0.2, 1.0, 0.5) == 1.0  # unknown length: one step
    assert annealed_beta(1, math.inf, 0.2, 1.0, 0.5) == 1.0


@pytest.mark.parametrize("latent", ["categorical", "normal", "ae"])
def test_terms_of_each_latent(latent):
    torch.manual_seed(0)
    config = {"input_dim": 8, "latent": latent, "latent_dim": 4, "num_classes": 5, "hidden_dim": 16,
              "encoder_layers": 1, "decoder_layers": 2}
    posterior, decoder = build_nets(config)
    features, mask = torch.randn(2, 3, 8), torch.tensor([[True, True, False], [True, False, False]])
    terms = token_vae_losses(posterior, decoder, features, mask, latent, tau=0.3, kl_threshold=0.3, beta=0.5)
    if latent == "ae":
        assert terms["loss"] is terms["recon"]
    else:
        torch.testing.assert_close(terms["loss"], terms["recon"] + 0.5 * terms["kl_thresholded"])
        assert float(terms["beta"]) == 0.5
    assert ("class_perplexity" in terms) == (latent == "categorical")
    with pytest.raises(ConfigError, match="no real tokens"):
        token_vae_losses(posterior, decoder, features, mask & False, latent, 0.3, 0.3, 0.5)
