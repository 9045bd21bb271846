"""Adam / AdamW with torch's fused kernel wherever the parameters allow it.

Why: the per-tensor ("for-loop") Adam on a CPU reads and writes each parameter, gradient and moment in
several passes; the fused kernel does one pass. On paraphrase-MiniLM-L3-v2's 17M parameters (1 thread) an
AdamW step took 157 ms per-tensor, 142 ms ``foreach`` and 26 ms fused -- a quarter of an SBERT-NLI training
step saved. sentence-transformers' trainer (transformers >= torch 2.8) also defaults to fused AdamW. The
update is the same algorithm; only the rounding of intermediate values may differ.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

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
    """``torch.optim.AdamW`` (``decoupled``) or ``Adam`` over ``params`` (tensors or param groups), fused
    when ``can_fuse``."""
    params = list(params)
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    optimizer = cls(params, lr=lr, fused=can_fuse(params) or None, **kwargs)
    # A fused optimizer advertises that it unscales fp16-GradScaler gradients itself, and Lightning then refuses
    # gradient clipping under any mixed precision (bf16 has no scaler at all). Without the flag a GradScaler
    # unscales first and calls the plain step: correct either way, and clipping works.
    optimizer._step_supports_amp_scaling = False
    return optimizer
