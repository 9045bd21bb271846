"""The invertible layers of the BERT-flow Glow, on ``(batch, C)`` vectors: ActNorm, linear map, coupling.

Each maps ``x -> (y, log|det dy/dx|)`` and has an exact ``inverse``. As the reference (``flow/glow_ops_1x1.py``):
the linear map is LU-parametrised from a random rotation (never singular); the affine coupling is ``z2 = (x2 +
shift) * sigmoid(raw + 2)``, its net's last layer zero-initialised.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["ActNorm", "Coupling", "FlowStep", "InvertibleLinear"]


def _moments(x: Tensor) -> tuple[Tensor, Tensor]:
    """Per-channel mean and population variance, pooled over all DDP ranks (else replicas start differently)."""
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
    """Per-channel ``y = (x + b) * exp(logs * logscale_factor)``; the first forward in training mode standardises
    that batch (Glow Sec. 3.1). ``initialized`` travels with the state dict, so a resume does not re-initialise."""

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
    """Glow's invertible 1x1 convolution on vectors: ``y = x @ W``, ``W = P L (U + diag(sign(s) exp(log s)))``
    (log|det| = ``sum(log s)``), or the fixed reversal."""

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
