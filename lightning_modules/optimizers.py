"""The one optimizer factory and the one learning-rate schedule factory of every trained method.

Adam / AdamW use torch's fused kernel wherever the parameters allow it: one pass over each parameter, gradient and
moment instead of several; the same algorithm, only the rounding of intermediate values may differ.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from sts_lightning.embeddings.compat import unscale_before_step

FUSED_DEVICES = ("cpu", "cuda")


def _params(params: Iterable) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    for item in params:
        found.extend(item["params"] if isinstance(item, dict) else [item])
    return found


def can_fuse(params: Iterable) -> bool:
    """Every parameter floating point and on a device the fused kernel supports."""
    tensors = _params(params)
    return bool(tensors) and all(p.device.type in FUSED_DEVICES and p.is_floating_point() for p in tensors)


def adam(params, lr: float, decoupled: bool = False, **kwargs) -> torch.optim.Optimizer:
    """``AdamW`` (``decoupled``) or ``Adam`` over tensors or param groups, fused when ``can_fuse``."""
    params = list(params)
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    optimizer = cls(params, lr=lr, fused=can_fuse(params) or None, **kwargs)
    # A fused optimizer advertises that it unscales fp16-GradScaler gradients itself, and Lightning then refuses
    # gradient clipping under any mixed precision; without the flag a GradScaler unscales first and clipping works.
    unscale_before_step(optimizer)
    return optimizer


# ------------------------------------------------------------------------------------ the one optimizer factory
OPTIMIZERS = ("adamw", "adam", "rmsprop")


def build_optimizer(kind: str, params, lr: float, rmsprop: type[torch.optim.Optimizer] = torch.optim.RMSprop,
                    **options) -> torch.optim.Optimizer:
    """The optimizer of every trained method: ``adamw`` (decoupled decay) / ``adam`` (fused where possible, see
    ``adam``) or ``rmsprop`` (``rmsprop``: the class, e.g. CT's row-sparse one); ``options`` go to its constructor
    (``betas``, or RMSprop's ``alpha`` / ``eps``)."""
    if kind in ("adamw", "adam"):
        return adam(params, lr=lr, decoupled=kind == "adamw", **options)
    if kind == "rmsprop":
        return rmsprop(params, lr=lr, **options)
    raise ValueError(f"unknown optimizer {kind!r}; valid: {list(OPTIMIZERS)}")


# ------------------------------------------------------------------------------------ the one schedule factory
SCHEDULES = ("linear", "constant", "step", "triangle")


def warmup_lambda(kind: str, warmup_steps: int, total_steps: int):
    """``linear`` / ``constant``: linear warm-up from ~0, then linear decay to 0 at ``total_steps``, or constant."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / (warmup_steps + 1)
        if kind == "constant":
            return 1.0
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor


def step_lambda(lr: float, final_lr: float, every: int, drops: int):
    """``step`` (CT's reference schedule): ``drops`` equal steps from ``lr`` to ``final_lr``. Keras
    ``PiecewiseConstantDecay`` keeps a value while ``step <= boundary``: with ``every=500`` steps 0..500 use ``lr``."""

    def factor(step: int) -> float:
        k = 0 if step <= every else min(drops, (step - 1) // every)
        return (lr - k * (lr - final_lr) / max(drops, 1)) / lr

    return factor


def triangle_lambda(lr: float, min_lr: float, warmup: int, total: int):
    """``triangle`` (Latte-Mix): linear ``min_lr -> lr`` over ``warmup`` steps, then back to ``min_lr`` at ``total``."""
    low = min_lr / lr

    def factor(step: int) -> float:
        if warmup > 0 and step < warmup:
            return low + (1 - low) * step / warmup
        if total <= warmup:
            return 1.0
        return max(low, 1 - (1 - low) * (step - warmup) / (total - warmup))

    return factor


def lr_schedule(optimizer: torch.optim.Optimizer, kind: str, lr: float, total_steps: int = 0,
                warmup_ratio: float = 0.0, final_lr: float | None = None, step_every: int = 500,
                drops: int = 4) -> dict:
    """The per-step learning-rate schedule of every trained method as Lightning's ``lr_scheduler`` entry: one
    warm-up length, ``ceil(warmup_ratio * total_steps)``, for every shape (``total_steps=0``: unknown)."""
    warmup = int(math.ceil(warmup_ratio * total_steps))
    if kind in ("linear", "constant"):
        factor = warmup_lambda(kind, warmup, int(total_steps))
    elif kind == "step":
        factor = step_lambda(lr, final_lr, step_every, drops)
    elif kind == "triangle":
        factor = triangle_lambda(lr, final_lr, warmup, int(total_steps))
    else:
        raise ValueError(f"unknown schedule {kind!r}; valid: {list(SCHEDULES)}")
    return {"scheduler": torch.optim.lr_scheduler.LambdaLR(optimizer, factor), "interval": "step"}


def known_steps(trainer) -> int:
    """``trainer.estimated_stepping_batches`` as an int, 0 where it is unknown (a stream without ``max_steps``)."""
    total = trainer.estimated_stepping_batches
    return int(total) if math.isfinite(total) and total > 0 else 0
