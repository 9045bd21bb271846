"""``in_fp32``: the losses of every method run in float32 under bf16 / fp16 autocast.

Shared because the same hazard hits every objective that multiplies embeddings (MNRL, SimCSE, CT, CoSENT):
the encoder's mixed-precision forward pass is the speed-up worth keeping, the few small products of the loss
are not.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["in_fp32"]


def in_fp32(fn: Callable) -> Callable:
    """Run a loss with autocast off and its bf16 / fp16 tensor arguments in float32.

    Why: under ``trainer.precision=bf16-mixed`` the embeddings arrive in bf16 (8 mantissa bits) and autocast
    would also run the similarity matmul in bf16; a cosine x 20 (MNRL) or an unbounded CT dot product is
    then off by ~0.1 in the logit, noise of the size of the signal between close candidates. The encoder's
    forward pass keeps the speed-up; the few (n x n) products of the loss cost nothing in fp32.
    """

    def cast(x):  # float64 stays float64
        return x.float() if isinstance(x, Tensor) and x.dtype in (torch.bfloat16, torch.float16) else x

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        device = next((a.device.type for a in args if isinstance(a, Tensor)), "cpu")
        with torch.autocast(device_type=device, enabled=False):
            return fn(*map(cast, args), **{k: cast(v) for k, v in kwargs.items()})

    return wrapper
