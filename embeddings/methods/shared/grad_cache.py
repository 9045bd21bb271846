"""Cached in-batch losses (GradCache, Gao et al. 2021): big contrastive batches, small memory.

Split at the embeddings: embed every mini-batch without a graph (saving the RNG state); the loss and ``g = d loss /
d reps`` on leaf copies; per mini-batch, replay the RNG, embed with a graph and pull ``g`` back with
``torch.autograd.grad``; return a surrogate whose value is the loss and whose gradient is that sum, so DDP,
clipping, accumulation and bf16 work unchanged. Wired by ``lightning_modules.grad_cache.CachedLoss``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import NamedTuple

import torch
from torch import Tensor


class EncoderView(NamedTuple):
    """Tokenized sentences to embed with one encoder (an ``HFEncoder``) and pooling: one argument of an in-batch loss."""

    encoder: object
    pool: Callable
    ids: Sequence[Sequence[int]]


class Chunked(NamedTuple):
    """One list of texts as mini-batch forward passes; ``cat(outputs)[inverse]`` is the list in input order."""

    forwards: list[Callable[[], Tensor]]
    inverse: Tensor

    def embed(self) -> Tensor:
        """All mini-batches with gradients in ONE graph: what the cached loss must reproduce (tests, no cache)."""
        out = torch.cat([forward() for forward in self.forwards])
        return out[self.inverse.to(out.device)]


def _forward_chunk(encoder, pool: Callable, ids: list[list[int]]) -> Tensor:
    return pool(encoder.forward_ids(ids))


def chunk_view(encoder, pool: Callable, texts: Sequence[str], mini_batch_size: int) -> Chunked:
    """``chunk_ids`` of ``encoder.tokenize(texts)``."""
    return chunk_ids(encoder, pool, encoder.tokenize(texts), mini_batch_size)


def chunk_ids(encoder, pool: Callable, ids: Sequence[Sequence[int]], mini_batch_size: int) -> Chunked:
    """Sort tokenized sentences by length and cut them into forward passes of ``mini_batch_size`` (least padding)."""
    if mini_batch_size < 1:
        raise ValueError(f"mini_batch_size must be >= 1, got {mini_batch_size}")
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    forwards = [partial(_forward_chunk, encoder, pool, [ids[i] for i in order[start:start + mini_batch_size]])
                for start in range(0, len(ids), mini_batch_size)]
    inverse = torch.empty(len(ids), dtype=torch.long)
    inverse[torch.tensor(order, dtype=torch.long)] = torch.arange(len(ids))
    return Chunked(forwards, inverse)


class RngState:
    """The CPU (and one CUDA device's) RNG state at construction; ``replay()`` runs a block from it (in ``fork_rng``)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device if device.type == "cuda" else None
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state(self.device) if self.device is not None else None

    @contextlib.contextmanager
    def replay(self) -> Iterator[None]:
        devices = [self.device] if self.device is not None else []
        with torch.random.fork_rng(devices=devices):
            torch.set_rng_state(self.cpu)
            if self.device is not None:
                torch.cuda.set_rng_state(self.cuda, self.device)
            yield


class _CachedGradients(torch.autograd.Function):
    """Value: ``loss`` (detached); gradient w.r.t. ``params[i]``: ``grads[i]`` x the incoming gradient."""

    @staticmethod
    def forward(ctx, loss: Tensor, grads: list[Tensor], *params: Tensor) -> Tensor:
        ctx.grads = grads
        return loss.clone()

    @staticmethod
    def backward(ctx, grad_output: Tensor):
        # In place (the buffers are ours, used once): no second gradient-sized copy of every parameter.
        # grad_output: 1, or Lightning's 1 / accumulate_grad_batches, or an fp16 loss scale.
        grads, ctx.grads = ctx.grads, None
        return (None, None, *(g.mul_(grad_output.to(g.dtype)) for g in grads))


def _accumulate(total: Tensor | None, grad: Tensor | None) -> Tensor | None:
    if grad is None:
        return total
    return grad if total is None else total + grad  # sparse (row-sparse embeddings) + sparse stays sparse


def cached_loss(views: Sequence[Chunked], loss_fn: Callable[..., Tensor], params: Sequence[Tensor]) -> Tensor:
    """The GradCache surrogate of ``loss_fn(*(v.embed() for v in views))``: equal to the loss, its backward puts
    the loss's gradient into ``params`` (a parameter no pass reaches keeps ``grad=None``)."""
    params = [p for p in params if p.requires_grad]
    device = params[0].device if params else torch.device("cpu")
    states: list[list[RngState]] = []
    reps = []
    with torch.no_grad():
        for view in views:
            states.append([])
            outs = []
            for forward in view.forwards:
                states[-1].append(RngState(device))
                outs.append(forward())
            reps.append(torch.cat(outs).requires_grad_(True))
    loss = loss_fn(*(r[v.inverse.to(r.device)] for r, v in zip(reps, views, strict=True)))
    if not loss.requires_grad:
        return loss
    first = torch.autograd.grad(loss, [*reps, *params], allow_unused=True)
    rep_grads, totals = first[:len(reps)], list(first[len(reps):])
    for view, view_states, grad in zip(views, states, rep_grads, strict=True):
        if grad is None:
            continue
        start = 0
        for forward, state in zip(view.forwards, view_states, strict=True):
            with state.replay(), torch.enable_grad():
                out = forward()
            rows = grad[start:start + out.shape[0]]
            start += out.shape[0]
            if not out.requires_grad:
                continue
            got = torch.autograd.grad(out, params, grad_outputs=rows.to(out.dtype), allow_unused=True)
            totals = [_accumulate(t, g) for t, g in zip(totals, got, strict=True)]
            del out, got
    used = [(p, t) for p, t in zip(params, totals, strict=True) if t is not None]
    if not used:
        return loss.detach()
    return _CachedGradients.apply(loss.detach(), [t for _, t in used], *(p for p, _ in used))
