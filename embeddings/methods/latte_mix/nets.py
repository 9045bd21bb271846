"""The token VAEs' networks (Latte-Mix and its baselines, Sec. 2.3-2.4, App. A.5) and their export format.

One posterior MLP and one decoder MLP serve all latents; only the posterior's head and the sampling differ.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from torch import Tensor, nn

from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.io.export_dir import ExportFormat, load_export, save_export
from sts_lightning.embeddings.io.model_card import ExportNotes
from sts_lightning.embeddings.methods.latte_mix import METHOD

LATENTS = ("categorical", "normal", "ae")
FORMAT, FORMAT_VERSION = METHOD.export, 1  # "sts-lightning/token-vae", declared once (latte_mix/__init__.py)
CONFIG_FILE, WEIGHTS_FILE = "token_vae_config.json", "token_vae.safetensors"
EXPORT_FORMAT = ExportFormat(FORMAT, FORMAT_VERSION, CONFIG_FILE, WEIGHTS_FILE, "token-VAE")
LATTE_MIX = METHOD.card()
NET_KEYS = ("input_dim", "latent", "latent_dim", "num_classes", "hidden_dim", "encoder_layers", "decoder_layers")


def mlp(inputs: int, hidden: int, outputs: int, layers: int) -> nn.Sequential:
    """``layers`` linear maps with ReLU between them; 1 layer is a single linear map (the paper's 1-layer encoder)."""
    if layers < 1:
        raise ConfigError(f"an MLP needs at least 1 layer, got {layers}")
    sizes = [inputs, *([hidden] * (layers - 1)), outputs]
    parts: list[nn.Module] = []
    for i in range(layers):
        parts += [nn.Linear(sizes[i], sizes[i + 1]), nn.ReLU()]
    return nn.Sequential(*parts[:-1])


class TokenPosterior(nn.Module):
    """q(z | u) per token: ``(N, input_dim)`` token states -> categorical ``logits`` ``(N, D, K)``, normal ``mu`` /
    ``logvar`` ``(N, D)`` or ae ``code`` ``(N, D)``."""

    def __init__(self, input_dim: int, latent: str = "categorical", latent_dim: int = 64, num_classes: int = 100,
                 hidden_dim: int = 512, layers: int = 1) -> None:
        super().__init__()
        if latent not in LATENTS:
            raise unknown_choice("token VAE latent", latent, LATENTS)
        if latent_dim < 1 or (latent == "categorical" and num_classes < 2):
            raise ConfigError(f"latent_dim must be >= 1 and num_classes >= 2, got {latent_dim}, {num_classes}")
        self.latent, self.latent_dim, self.num_classes = latent, int(latent_dim), int(num_classes)
        width = {"categorical": latent_dim * num_classes, "normal": 2 * latent_dim, "ae": latent_dim}[latent]
        self.net = mlp(int(input_dim), int(hidden_dim), width, int(layers))

    def forward(self, features: Tensor) -> dict[str, Tensor]:
        out = self.net(features)
        if self.latent == "categorical":
            return {"logits": out.view(*out.shape[:-1], self.latent_dim, self.num_classes)}
        if self.latent == "normal":
            mu, logvar = out.chunk(2, dim=-1)
            return {"mu": mu, "logvar": logvar.clamp(-20.0, 10.0)}  # exp() stays finite in float32
        return {"code": out}

    @property
    def decoder_input_dim(self) -> int:
        return self.latent_dim * (self.num_classes if self.latent == "categorical" else 1)


def build_nets(config: Mapping) -> tuple[TokenPosterior, nn.Sequential]:
    """Posterior and decoder from the ``NET_KEYS`` of a config (hyper-parameters or an export's JSON)."""
    posterior = TokenPosterior(int(config["input_dim"]), config["latent"], int(config["latent_dim"]),
                               int(config["num_classes"]), int(config["hidden_dim"]), int(config["encoder_layers"]))
    decoder = mlp(posterior.decoder_input_dim, int(config["hidden_dim"]), int(config["input_dim"]),
                  int(config["decoder_layers"]))
    return posterior, decoder


def save_token_vae(path: str | os.PathLike, posterior: nn.Module, decoder: nn.Module, config: Mapping,
                   note: ExportNotes | None = None) -> Path:
    """``token_vae_config.json`` + ``token_vae.safetensors`` written atomically (temp dir, then rename)."""
    missing = {"model_name_or_path", "layer", "max_length", *NET_KEYS} - set(config)
    if missing:
        raise ConfigError(f"token VAE export config lacks {sorted(missing)}")
    state = {f"posterior.{k}": v for k, v in posterior.state_dict().items()}
    state.update({f"decoder.{k}": v for k, v in decoder.state_dict().items()})
    return save_export(path, EXPORT_FORMAT, config, state, note)


def load_token_vae(path: str | os.PathLike) -> tuple[TokenPosterior, nn.Sequential, dict]:
    """Posterior, decoder (eval mode, CPU) and config of an export directory."""
    config, state = load_export(path, EXPORT_FORMAT)
    posterior, decoder = build_nets(config)
    posterior.load_state_dict({k[len("posterior."):]: v for k, v in state.items() if k.startswith("posterior.")})
    decoder.load_state_dict({k[len("decoder."):]: v for k, v in state.items() if k.startswith("decoder.")})
    return posterior.eval(), decoder.eval(), config


__all__ = ["EXPORT_FORMAT", "LATENTS", "LATTE_MIX", "NET_KEYS", "TokenPosterior", "build_nets", "load_token_vae", "mlp", "save_token_vae"]
