"""Fused Adam / AdamW: chosen where supported, the same updates as the per-tensor kernel, clipping allowed."""

from __future__ import annotations

import torch

from sts_lightning.lightning_modules.optimizers import adam, can_fuse
from tests.tolerance import tolerance_kwargs


def _steps(fused_ok: bool, decoupled: bool) -> torch.Tensor:
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(64, 32))
    groups = [{"params": [w], "weight_decay": 0.01}]
    opt = adam(groups, lr=1e-2, decoupled=decoupled) if fused_ok else \
        (torch.optim.AdamW if decoupled else torch.optim.Adam)(groups, lr=1e-2)
    for _ in range(5):
        w.grad = torch.sin(w.detach() * 3)
        opt.step()
    return w.detach()


def test_fused_on_cpu_and_same_updates_as_the_per_tensor_kernel():
    params = [torch.nn.Parameter(torch.ones(3))]
    assert can_fuse(params) and adam(params, lr=1e-3).defaults["fused"] is True
    assert not can_fuse([torch.ones(3, dtype=torch.long)]) and not can_fuse([])
    for decoupled in (False, True):
        # element-wise updates (no reduction), five steps chained
        torch.testing.assert_close(_steps(True, decoupled), _steps(False, decoupled),
                                   **tolerance_kwargs(torch.float32, reduction=1, depth=5))


def test_lightning_allows_gradient_clipping_with_it():
    from lightning.pytorch.plugins.precision.amp import _optimizer_handles_unscaling

    assert not _optimizer_handles_unscaling(adam([torch.nn.Parameter(torch.ones(3))], lr=1e-3))
