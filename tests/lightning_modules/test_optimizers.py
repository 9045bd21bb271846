"""Fused Adam / AdamW: chosen where supported, the same updates as the per-tensor kernel, clipping allowed; the one
schedule factory gives every method the learning rates of the code it replaced."""

from __future__ import annotations

import importlib
import math
import types

import pytest
import torch

from sts_lightning.lightning_modules.optimizers import adam, build_optimizer, can_fuse, lr_schedule
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


# ------------------------------------------------------------------ one schedule factory: the same lrs as before
def _reference_factor(kind: str, lr: float, total: int, warmup_ratio: float, **o):
    """The three schedules as base.py, ct.py and latte_mix.py wrote them before ``lr_schedule`` (verbatim maths)."""
    warmup = int(math.ceil(warmup_ratio * total))
    if kind == "step":
        every, drops, final_lr = o["step_every"], o["drops"], o["final_lr"]
        return lambda s: (lr - (0 if s <= every else min(drops, (s - 1) // every)) * (lr - final_lr) / max(drops, 1)) / lr
    if kind == "triangle":
        low = o["final_lr"] / lr
        return lambda s: (low + (1 - low) * s / warmup if warmup > 0 and s < warmup else 1.0 if total <= warmup
                          else max(low, 1 - (1 - low) * (s - warmup) / (total - warmup)))
    return lambda s: ((s + 1) / (warmup + 1) if s < warmup else 1.0 if kind == "constant"
                      else max(0.0, (total - s) / max(1, total - warmup)))


def _module_lrs(module, total: int) -> list[list[float]]:
    module._trainer = types.SimpleNamespace(estimated_stepping_batches=total, world_size=1, strategy=None,
                                            gradient_clip_val=None)
    conf = module.configure_optimizers()
    optimizer, schedule = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
    assert conf["lr_scheduler"]["interval"] == "step"
    lrs = []
    for _ in range(total):
        lrs.append([group["lr"] for group in optimizer.param_groups])
        optimizer.step()
        schedule.step()
    return lrs


CASES = {  # module, its arguments, (schedule kind, lr, warm-up ratio, options) as the old code computed them
    "sbert_nli": ("sbert_nli.SBERTNLIModule", {}, ("linear", 2e-5, 0.1, {})),
    "rmsprop_constant": ("sbert_nli.SBERTNLIModule", {"optimizer": "rmsprop", "scheduler": "constant",
                                                      "warmup_ratio": 0.3}, ("constant", 2e-5, 0.3, {})),
    "simcse": ("simcse.SimCSEModule", {}, ("linear", 3e-5, 0.0, {})),
    "ct_step": ("ct.ContrastiveTensionModule", {"lr_step_every": 7, "lr_drops": 3},
                ("step", 1e-5, 0.0, {"final_lr": 2e-6, "step_every": 7, "drops": 3})),
    "ct_linear": ("ct.ContrastiveTensionModule", {"scheduler": "linear", "optimizer": "adamw", "warmup_ratio": 0.2},
                  ("linear", 1e-5, 0.2, {})),
    "latte_mix": ("latte_mix.LatteMixModule", {"latent_dim": 4, "num_classes": 5, "hidden_dim": 16},
                  ("triangle", 1e-3, 0.1, {"final_lr": 2e-5})),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_schedule_gives_the_learning_rates_of_the_code_it_replaced(case, tiny_model_dir, one_thread):
    target, kwargs, (kind, lr, warmup_ratio, options) = CASES[case]
    module_name, cls_name = target.split(".")
    cls = getattr(importlib.import_module(f"sts_lightning.lightning_modules.{module_name}"), cls_name)
    total = 37
    lrs = _module_lrs(cls(str(tiny_model_dir), max_length=16, **kwargs), total)
    factor = _reference_factor(kind, lr, total, warmup_ratio, **options)
    assert [row[0] for row in lrs] == [lr * factor(s) for s in range(total)]  # bit-identical, not approx


def test_factories_refuse_unknown_kinds():
    params = [torch.nn.Parameter(torch.ones(2))]
    with pytest.raises(ValueError, match="unknown optimizer"):
        build_optimizer("sgd", params, 1e-3)
    with pytest.raises(ValueError, match="unknown schedule"):
        lr_schedule(build_optimizer("adam", params, 1e-3), "cosine", 1e-3)
