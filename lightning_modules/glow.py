"""Glow on sentence vectors: the flow of BERT-flow (Li et al., EMNLP 2020), in plain torch.

BERT-flow maps pooled embeddings to an isotropic Gaussian with a Glow (Kingma & Dhariwal 2018) trained
by maximum likelihood, then scores with cosine in the latent space. The reference code
(bohanli/BERT-flow, ``flow/glow_1x1.py`` + ``flow/glow_ops_1x1.py``) treats a ``(batch, C)`` vector as a
``1 x 1 x C`` image, so every convolution is 1x1 (a dense layer over channels) and ``squeeze`` is
commented out: a 1x1 image has no spatial extent to fold into channels. What stays of the multi-scale
architecture is ``split``: after each level but the last, the second half of the channels is factored
out under the standard normal prior and the first half flows on. We reproduce exactly that on vectors.

Per step, as in the reference: ActNorm -> invertible linear map -> coupling. Choices:

* Invertible linear map: LU parametrisation ``W = P L (U + diag(sign(s) exp(log s)))``, initialised
  from a random rotation (Glow paper Sec. 3.2, the reference's ``permutation=False`` path). log|det W|
  is ``sum(log s)``, O(C) instead of an O(C^3) ``slogdet``, and W can never become singular because the
  diagonal of U is an exponential. ``permutation="reverse"`` is the reference's fixed channel reversal.
* The reference default config (``--flow_model_config=config_l3_d3_w32``) is levels 3, depth 3, width 32
  with ``coupling="additive"`` and ``permutation=true`` (the fixed reversal). Our defaults keep the
  Glow paper's affine coupling and learned LU map; ``coupling="additive", permutation="reverse"`` is
  the reference's architecture.
* Affine coupling as in the reference: ``z2 = (x2 + shift) * sigmoid(raw + 2)`` with shift and raw
  interleaved in the net's output. The net's last layer is zero-initialised, so at init the additive
  coupling is the identity and the affine one a constant scaling by ``sigmoid(2) ~ 0.88`` (absorbed by
  the next ActNorm): the flow starts as a fixed affine map of the standardised input.
* ``nll`` is in bits per dimension, like the reference objective (``-log p / (C log 2)``).
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["ActNorm", "Coupling", "FlowStep", "Glow", "InvertibleLinear"]


def _moments(x: Tensor) -> tuple[Tensor, Tensor]:
    """Per-channel mean and (population) variance, pooled over all ranks when running distributed.

    Without the all-reduce every DDP rank would initialise ActNorm on its own shard and the replicas
    would silently start from different parameters (DDP only broadcasts parameters at wrap time).
    """
    n = torch.tensor(float(x.shape[0]), dtype=x.dtype, device=x.device)
    total = x.sum(0)
    distributed = dist.is_available() and dist.is_initialized()
    if distributed:
        dist.all_reduce(total)
        dist.all_reduce(n)
    mean = total / n
    sq = ((x - mean) ** 2).sum(0)
    if distributed:
        dist.all_reduce(sq)
    return mean, sq / n


class ActNorm(nn.Module):
    """Per-channel ``y = (x + b) * exp(logs * logscale_factor)`` with data-dependent init.

    The first forward in training mode sets ``b, logs`` so that this batch comes out with zero mean and
    unit variance per channel (Glow Sec. 3.1; the reference runs the same init once, at step 0, through
    ``GlowInitHook``). ``logscale_factor=3`` is the reference's reparametrisation: it triples the
    effective learning rate of the log-scale. Until initialised (e.g. a validation sanity check before
    training) the layer is the identity. The ``initialized`` buffer travels with the state dict, so a
    resumed checkpoint is not re-initialised.
    """

    def __init__(self, channels: int, logscale_factor: float = 3.0) -> None:
        super().__init__()
        self.logscale_factor = logscale_factor
        self.bias = nn.Parameter(torch.zeros(channels))
        self.logs = nn.Parameter(torch.zeros(channels))
        self.register_buffer("initialized", torch.zeros((), dtype=torch.uint8))

    @torch.no_grad()
    def _initialize(self, x: Tensor) -> None:
        if x.shape[0] < 2:
            raise ValueError("ActNorm's data-dependent init needs a batch of at least 2 vectors")
        mean, var = _moments(x)
        self.bias.copy_(-mean)
        self.logs.copy_(-torch.log(var.sqrt() + 1e-6) / self.logscale_factor)
        self.initialized.fill_(1)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        if self.training and not self.initialized:
            self._initialize(x)
        logs = self.logs * self.logscale_factor
        return (x + self.bias) * logs.exp(), logs.sum().expand(x.shape[0])

    def inverse(self, y: Tensor) -> Tensor:
        return y * (-self.logs * self.logscale_factor).exp() - self.bias


class InvertibleLinear(nn.Module):
    """Glow's invertible 1x1 convolution on vectors: ``y = x @ W`` (see the module docstring)."""

    def __init__(self, channels: int, permutation: str = "lu") -> None:
        super().__init__()
        self.permutation = permutation
        if permutation == "reverse":
            return
        q = torch.linalg.qr(torch.randn(channels, channels, dtype=torch.float64))[0]
        p, lower, upper = torch.linalg.lu(q)
        s = upper.diagonal()
        self.register_buffer("p", p.float())
        self.register_buffer("sign_s", s.sign().float())
        self.register_buffer("l_mask", torch.tril(torch.ones(channels, channels), -1))
        self.lower = nn.Parameter(lower.float())
        self.upper = nn.Parameter(torch.triu(upper, 1).float())
        self.log_s = nn.Parameter(s.abs().log().float())

    def weight(self) -> Tensor:
        eye = torch.eye(self.l_mask.shape[0], dtype=self.l_mask.dtype, device=self.l_mask.device)
        lower = self.lower * self.l_mask + eye
        upper = self.upper * self.l_mask.T + torch.diag(self.sign_s * self.log_s.exp())
        return self.p @ lower @ upper

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        if self.permutation == "reverse":
            return x.flip(-1), x.new_zeros(x.shape[0])
        return x @ self.weight(), self.log_s.sum().expand(x.shape[0])

    def inverse(self, y: Tensor) -> Tensor:
        if self.permutation == "reverse":
            return y.flip(-1)
        return y @ torch.linalg.inv(self.weight())


class _CouplingNet(nn.Module):
    """The reference's ``conv_stack`` with 1x1 filters: (dense -> ActNorm -> ReLU) x 2 -> zero dense."""

    def __init__(self, in_channels: int, hidden: int, out_channels: int) -> None:
        super().__init__()
        self.lin1, self.norm1 = nn.Linear(in_channels, hidden, bias=False), ActNorm(hidden)
        self.lin2, self.norm2 = nn.Linear(hidden, hidden, bias=False), ActNorm(hidden)
        self.out = nn.Linear(hidden, out_channels)
        self.out_logs = nn.Parameter(torch.zeros(out_channels))
        nn.init.normal_(self.lin1.weight, std=0.05)
        nn.init.normal_(self.lin2.weight, std=0.05)
        for zero in (self.out.weight, self.out.bias):  # with out_logs: the net outputs exactly 0 at init
            nn.init.zeros_(zero)

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.norm1(self.lin1(x))[0])
        h = F.relu(self.norm2(self.lin2(h))[0])
        return self.out(h) * (self.out_logs * 3.0).exp()


class Coupling(nn.Module):
    """Coupling on channel halves; ``affine=False`` gives the additive (volume-preserving) variant."""

    def __init__(self, channels: int, hidden: int = 32, affine: bool = True) -> None:
        super().__init__()
        self.affine = affine
        half = channels // 2
        self.net = _CouplingNet(half, hidden, 2 * half if affine else half)

    def _shift_logscale(self, x1: Tensor) -> tuple[Tensor, Tensor | None]:
        h = self.net(x1)
        if not self.affine:
            return h, None
        return h[..., 0::2], F.logsigmoid(h[..., 1::2] + 2.0)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        x1, x2 = x.chunk(2, dim=-1)
        shift, log_scale = self._shift_logscale(x1)
        if log_scale is None:
            return torch.cat([x1, x2 + shift], -1), x.new_zeros(x.shape[0])
        return torch.cat([x1, (x2 + shift) * log_scale.exp()], -1), log_scale.sum(-1)

    def inverse(self, y: Tensor) -> Tensor:
        y1, y2 = y.chunk(2, dim=-1)
        shift, log_scale = self._shift_logscale(y1)
        x2 = y2 - shift if log_scale is None else y2 * (-log_scale).exp() - shift
        return torch.cat([y1, x2], -1)


class FlowStep(nn.Module):
    """One Glow step (the reference's ``revnet_step``): ActNorm -> invertible linear -> coupling."""

    def __init__(self, channels: int, hidden: int, affine: bool, permutation: str) -> None:
        super().__init__()
        self.layers = nn.ModuleList([ActNorm(channels), InvertibleLinear(channels, permutation),
                                     Coupling(channels, hidden, affine)])

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        log_det = x.new_zeros(x.shape[0])
        for layer in self.layers:
            x, ld = layer(x)
            log_det = log_det + ld
        return x, log_det

    def inverse(self, y: Tensor) -> Tensor:
        for layer in reversed(self.layers):
            y = layer.inverse(y)
        return y


class Glow(nn.Module):
    """Multi-scale Glow on ``(batch, dim)`` vectors with a standard normal prior on the whole latent.

    Level ``l`` runs ``depth`` steps on ``dim / 2**l`` channels, then (but the last) factors out its second
    half. ``z = cat(factored_0, ..., factored_{L-2}, last)``, the reference's ``concat(eps + [z])`` (its
    split prior is a fixed N(0, 1), so eps is the half itself). The first forward in training mode runs
    the data-dependent init. Args: ``dim`` (a multiple of ``2**levels``: every level's coupling halves
    it), ``levels``, ``depth``, ``hidden`` (coupling width), ``coupling`` (``"affine"``/``"additive"``),
    ``permutation`` (``"lu"``/``"reverse"``); see the module docstring for the reference's values.
    """

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
        return log_det - 0.5 * (z**2).sum(-1) - 0.5 * self.dim * math.log(2 * math.pi)

    def nll(self, x: Tensor) -> Tensor:
        """Negative log-likelihood in bits per dimension, per vector (the reference's objective)."""
        return -self.log_prob(x) / (self.dim * math.log(2.0))
