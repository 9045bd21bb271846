"""The token VAEs' objective (Latte-Mix, Li et al., and its Normal VAE / AE baselines) on tensors.

Eq. 3 per real token ``u``: ``beta * KL[q(z|u) || p(z)] - E_q[log p(u|z)]``, ``log p(u|z)`` a unit-variance Gaussian.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.latte_mix.maths import (
    categorical_kl_uniform,
    class_usage,
    gaussian_kl_standard,
    gumbel_softmax,
    thresholded_kl,
)

__all__ = ["annealed_beta", "token_vae_losses"]


def annealed_beta(step: int, total: float, beta_start: float, beta_end: float, warmup_ratio: float) -> float:
    """``beta`` at optimizer ``step``: linear from ``beta_start`` to ``beta_end`` over ``warmup_ratio`` of
    ``total`` steps, then flat (App. A.4: annealed from 0 to 1). An unknown ``total`` (0, inf) ramps in one step."""
    ramp = max(1.0, warmup_ratio * total) if math.isfinite(total) and total > 0 else 1.0
    return beta_start + (beta_end - beta_start) * min(1.0, step / ramp)


def token_vae_losses(posterior: nn.Module, decoder: nn.Module, features: Tensor, mask: Tensor, latent: str,
                     tau: float, kl_threshold: float, beta: float) -> dict[str, Tensor]:
    """``loss``, ``recon`` and (but for ``ae``) the KL terms and diagnostics over the real tokens of ``(B, T, H)``
    ``features`` (float32)."""
    tokens = features[mask].float()  # (N, H): padding never enters the VAE
    if tokens.shape[0] == 0:
        raise ConfigError("a training batch has no real tokens (all masks are False)")
    params = posterior(tokens)
    every = torch.ones(1, tokens.shape[0], dtype=torch.bool, device=tokens.device)  # tokens as one "sentence"
    out: dict[str, Tensor] = {}
    if latent == "categorical":
        z = gumbel_softmax(params["logits"], tau).flatten(1)
        kl_units = categorical_kl_uniform(params["logits"])  # (N, D)
        out["class_perplexity"] = class_usage(params["logits"].softmax(-1)[None], every)
    elif latent == "normal":
        std = (0.5 * params["logvar"]).exp()
        z = params["mu"] + std * torch.randn_like(std)
        kl_units = gaussian_kl_standard(params["mu"], params["logvar"])  # (N, D)
    else:
        z, kl_units = params["code"], None
    recon = 0.5 * (decoder(z) - tokens).pow(2).sum(-1).mean()
    out["recon"] = recon
    if kl_units is None:
        out["loss"] = recon
        return out
    kl_loss, stats = thresholded_kl(kl_units[None], every, kl_threshold)
    out.update(loss=recon + beta * kl_loss, kl_thresholded=kl_loss, beta=torch.tensor(beta), **stats)
    return out
