"""RMSprop that updates only the rows a sparse (``nn.Embedding(sparse=True)``) gradient touches.

Why: in a CT step only the batch's rows of the word embeddings get a gradient, yet dense RMSprop reads and writes
every row, most of a CPU step. Plain RMSprop (no momentum, not centred, no weight decay on sparse parameters): an
untouched row keeps its weights and only its average decays, so the ``k`` steps' decay since a row was last touched
is applied at once, ``v <- alpha**k * v``, when it is next touched (rounded once instead of ``k`` times).
``state_dict()`` brings every row up to the current step first: a checkpoint holds a plain RMSprop state.
"""

from __future__ import annotations

import torch
from lightning.pytorch.strategies import SingleDeviceStrategy
from torch import Tensor

from sts_lightning.embeddings.errors import ConfigError


def sparse_grads_pay(trainer, device: torch.device, weight_decay: float) -> bool:
    """Whether sparse embedding gradients are safe and worth it: one process (DDP's all-reduce is dense on NCCL),
    no gradient clipping (``clip_grad_norm_`` rejects sparse tensors), no weight decay (it moves every row every
    step), on the CPU (on a GPU the dense update is one fast kernel). ``trainer`` ``None``: no trainer yet."""
    if weight_decay or device.type != "cpu":
        return False
    if trainer is None:
        return True
    return trainer.world_size == 1 and isinstance(trainer.strategy, SingleDeviceStrategy) \
        and not trainer.gradient_clip_val


def pending_decay(alpha: float, elapsed: Tensor, dtype: torch.dtype) -> Tensor:
    """``alpha ** elapsed`` per row, as a ``(rows, 1)`` column: the decay of the steps a row was not touched."""
    return torch.full_like(elapsed, alpha).pow_(elapsed).to(dtype).unsqueeze(1)


class RowSparseRMSprop(torch.optim.RMSprop):
    """``torch.optim.RMSprop`` whose sparse-gradient parameters are updated row by row, lazily."""

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0) -> None:
        super().__init__(params, lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        held: list[tuple[Tensor, Tensor]] = []
        try:
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None and p.grad.is_sparse:
                        self._sparse_step(p, p.grad, group)
                        held.append((p, p.grad))
                        p.grad = None  # torch's step skips it
            super().step()
        finally:
            for p, grad in held:
                p.grad = grad
        return loss

    def _sparse_step(self, p: Tensor, grad: Tensor, group: dict) -> None:
        if group["weight_decay"] or group["momentum"] or group["centered"] or group["maximize"]:
            raise ConfigError("sparse embedding gradients need plain RMSprop (no weight decay, momentum, centring "
                              "or maximize) on the embedding matrix; turn them off for it or use dense gradients")
        state = self.state[p]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32)
            state["square_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            # float32 (exact to 2**24 steps): Optimizer.load_state_dict casts floating state to the param dtype
            state["row_step"] = torch.zeros(p.shape[0], dtype=torch.float32, device=p.device)
        elif "row_step" not in state:  # a plain RMSprop state (e.g. a checkpoint of dense training): all rows current
            state["row_step"] = torch.full((p.shape[0],), float(state["step"]), device=p.device)
        state["step"] += 1
        step = state["step"].to(p.device)
        grad = grad.coalesce()
        rows, values = grad.indices()[0], grad.values()
        alpha = group["alpha"]
        square_avg, row_step = state["square_avg"], state["row_step"]
        avg = square_avg.index_select(0, rows).mul_(pending_decay(alpha, step - row_step[rows], p.dtype))
        avg.addcmul_(values, values, value=1 - alpha)
        square_avg.index_copy_(0, rows, avg)
        row_step.index_fill_(0, rows, float(step))
        updated = p.index_select(0, rows).addcdiv_(values, avg.sqrt().add_(group["eps"]), value=-group["lr"])
        p.index_copy_(0, rows, updated)

    def catch_up(self) -> None:
        """Apply every row's pending decay, so ``square_avg`` equals a dense RMSprop's (up to rounding)."""
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state.get(p)
                if not state or "row_step" not in state:
                    continue
                step = state["step"].to(p.device)
                state["square_avg"].mul_(pending_decay(group["alpha"], step - state["row_step"], p.dtype))
                state["row_step"].fill_(float(step))

    def state_dict(self) -> dict:
        self.catch_up()
        return super().state_dict()
