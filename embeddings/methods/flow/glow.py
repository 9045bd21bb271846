"""Glow on sentence vectors: the flow of BERT-flow (Li et al., EMNLP 2020), in plain torch. As the reference
(bohanli/BERT-flow), a ``(batch, C)`` vector is a ``1 x 1 x C`` image: every convolution 1x1, no ``squeeze``."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from sts_lightning.embeddings.methods.flow.glow_layers import ActNorm, Coupling, FlowStep, InvertibleLinear
from sts_lightning.embeddings.methods.flow.objective import bits_per_dim, log_likelihood

__all__ = ["ActNorm", "Coupling", "FlowStep", "Glow", "InvertibleLinear"]


class Glow(nn.Module):
    """Multi-scale Glow with a standard normal prior on the whole latent: level ``l`` runs ``depth`` steps on
    ``dim / 2**l`` channels, then (but the last) factors out its second half: ``z = cat(factored_0, ..., last)``."""

    def __init__(self, dim: int, levels: int = 3, depth: int = 3, hidden: int = 32,
                 coupling: str = "affine", permutation: str = "lu") -> None:
        super().__init__()
        if coupling not in ("affine", "additive"):
            raise ValueError(f"coupling must be 'affine' or 'additive', got {coupling!r}")
        if permutation not in ("lu", "reverse"):
            raise ValueError(f"permutation must be 'lu' or 'reverse', got {permutation!r}")
        if levels < 1 or depth < 1 or hidden < 1:
            raise ValueError(f"levels, depth and hidden must be >= 1, got {levels}, {depth}, {hidden}")
        if dim < 2**levels or dim % 2**levels:
            raise ValueError(
                f"dim={dim} cannot be split by {levels} levels: each level's coupling halves the "
                f"channels and each split halves them again, so dim must be a multiple of 2**levels="
                f"{2**levels}; use fewer levels or project the embedding first"
            )
        self.dim, self.n_levels = dim, levels
        self.levels = nn.ModuleList(
            nn.ModuleList(FlowStep(dim >> level, hidden, coupling == "affine", permutation) for _ in range(depth))
            for level in range(levels)
        )

    @property
    def initialized(self) -> bool:
        """Whether every ActNorm (flow and coupling nets) has had its data-dependent init."""
        return all(bool(m.initialized) for m in self.modules() if isinstance(m, ActNorm))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Map data to latent. Returns ``z`` ``(batch, dim)`` and ``log|det dz/dx|`` ``(batch,)`` in nats."""
        if x.ndim != 2 or x.shape[-1] != self.dim:
            raise ValueError(f"expected a (batch, {self.dim}) tensor, got {tuple(x.shape)}")
        log_det = x.new_zeros(x.shape[0])
        factored = []
        for level, steps in enumerate(self.levels):
            for step in steps:
                x, ld = step(x)
                log_det = log_det + ld
            if level < self.n_levels - 1:
                x, z_level = x.chunk(2, dim=-1)
                factored.append(z_level)
        return torch.cat([*factored, x], dim=-1), log_det

    def inverse(self, z: Tensor) -> Tensor:
        """Map latent back to data (exact up to float error)."""
        if not self.initialized:
            raise RuntimeError("Glow.inverse before ActNorm's data-dependent init: run forward on a training batch")
        sizes = [self.dim >> (level + 1) for level in range(self.n_levels - 1)] + [self.dim >> (self.n_levels - 1)]
        parts = z.split(sizes, dim=-1)
        x = parts[-1]
        for level in reversed(range(self.n_levels)):
            if level < self.n_levels - 1:
                x = torch.cat([x, parts[level]], dim=-1)
            for step in reversed(self.levels[level]):
                x = step.inverse(x)
        return x

    def log_prob(self, x: Tensor) -> Tensor:
        """``log p(x)`` in nats per vector: N(0, I) log-density of ``z`` plus the log-det."""
        z, log_det = self(x)
        return log_likelihood(z, log_det)

    def nll(self, x: Tensor) -> Tensor:
        """Negative log-likelihood in bits per dimension, per vector (the reference's objective)."""
        return bits_per_dim(self.log_prob(x), self.dim)
