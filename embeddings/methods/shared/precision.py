"""``in_fp32``: the losses of every method run in float32 under bf16 / fp16 autocast."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["in_fp32"]


def in_fp32(fn: Callable) -> Callable:
    """Run a loss with autocast off and its bf16 / fp16 tensor arguments in float32: in bf16 a cosine x 20 (MNRL) is
    off by ~0.1 in the logit, the size of the signal between close candidates."""

    def cast(x):  # float64 stays float64
        return x.float() if isinstance(x, Tensor) and x.dtype in (torch.bfloat16, torch.float16) else x

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        device = next((a.device.type for a in args if isinstance(a, Tensor)), "cpu")
        with torch.autocast(device_type=device, enabled=False):
            return fn(*map(cast, args), **{k: cast(v) for k, v in kwargs.items()})

    return wrapper
