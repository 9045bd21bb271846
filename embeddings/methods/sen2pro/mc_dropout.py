"""MC dropout at close to the cost of an eval pass: the same dropout, cheaper random numbers.

What a Sen2Pro MC-dropout pass is (kept exactly): the encoder's own ``stochastic()`` context (for
``HFEncoder``: ``model.train()``), so every dropout site of the model is active with its configured
rate - for BERT / MPNet the embedding output, the attention probabilities and both residual branches
of every layer - and each element is kept independently with probability ``1 - p`` and scaled by
``1 / (1 - p)``. Nothing else changes (no weights, no sites added or removed).

Why the plain way is slow on CPU (torch profiler, all-MiniLM-L6-v2, 512 STS-B dev sentences):
- torch's CPU dropout draws one Bernoulli per element in a scalar generator loop (~10-15 ns per
  element measured here, where a multiply costs ~0.3 ns; it does not spread over threads while the
  matmuls do), then divides the mask and multiplies. MiniLM-L6 has 13 sites of ``tokens x hidden``
  elements per pass plus 6 of ``batch x heads x L x L``: ``bernoulli_`` alone was 12% of a pass on
  one thread, more on two.
- transformers passes the attention dropout to ``scaled_dot_product_attention`` (``dropout_p``); on
  CPU the fused flash kernel refuses ``dropout_p > 0``, so attention runs the math kernel (bmm,
  softmax, masks) with that same Bernoulli dropout on the probabilities. At STS lengths the math
  kernel costs about what the flash kernel does; its dropout is the cost. There is no fused CPU
  attention with dropout to stay on.

What changes here (CPU only; on CUDA torch's dropout and SDPA's own fused dropout are already fast
and are left as they are):
- every ``torch.nn.Dropout`` module of the model runs :func:`sparse_dropout`: same distribution,
  drawn as the POSITIONS of the dropped elements - the gaps between successes of a Bernoulli(p)
  process are Geometric(p), so about ``p * n`` draws instead of ``n`` - then one multiply by
  ``1 / (1 - p)`` and a scatter of zeros;
- attention that calls its ``nn.Dropout`` on the probabilities (eager, e.g. MPNet) is covered by
  the above. A model on transformers' ``sdpa`` attention (BERT, MiniLM) only hands ``p`` to SDPA;
  for the context its config switches to :data:`SPARSE_SDPA`, an attention function registered
  with transformers (mask built as for ``sdpa``) that computes the same math-kernel attention
  (``softmax(q k^T * scale + mask) v``) with :func:`sparse_dropout` on the probabilities, and hands
  every call it does not cover (no dropout, causal, grouped keys, a position bias) to ``sdpa``.
  Without it that dropout alone was ~6% of a MiniLM-L6 pass on two threads.
Randomness comes from torch's default generator, so ``torch.manual_seed`` makes a pass reproducible.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator

import torch

from sts_lightning.embeddings.encoders.base import BaseEncoder


def drop_positions(n: int, p: float, device: torch.device | str = "cpu", chunk: int | None = None) -> torch.Tensor:
    """Sorted indices in ``[0, n)``, each present independently with probability ``p`` (a Bernoulli process).

    The gaps between successive successes of a Bernoulli(p) process are i.i.d. Geometric(p) on
    {1, 2, ...}, so the positions are cumulative sums of geometric draws (minus 1): about ``n * p``
    draws instead of ``n``. Draws come in chunks (default: the mean + 6 sd, so almost always one)
    until the positions pass ``n``.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if n <= 0 or p == 0.0:
        return torch.empty(0, dtype=torch.long, device=device)
    if p == 1.0:
        return torch.arange(n, device=device)
    if chunk is None:
        mean = n * p
        chunk = int(mean + 6.0 * math.sqrt(mean * (1.0 - p))) + 16
    parts = []
    last = -1  # position of the latest success
    while last < n - 1:
        pos = torch.empty(chunk, dtype=torch.long, device=device).geometric_(p).cumsum_(0).add_(last)
        parts.append(pos)
        last = int(pos[-1])
    out = torch.cat(parts) if len(parts) > 1 else parts[0]
    return out[: int(torch.searchsorted(out, n))]


def sparse_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Training-mode dropout of ``x`` (same distribution as ``F.dropout(x, p, True)``), fast on CPU.

    Each element is zeroed independently with probability ``p``, the others are scaled by
    ``1 / (1 - p)``. Returns a new tensor (``x`` is never modified). Off CPU: ``F.dropout``.
    """
    if x.device.type != "cpu":
        return torch.nn.functional.dropout(x, p, True)
    if p == 0.0:
        return x.clone()
    if p == 1.0:
        return torch.zeros_like(x)
    return _zero_drawn_((x * (1.0 / (1.0 - p))).contiguous(), p)


def _scale_and_drop_(x: torch.Tensor, p: float) -> torch.Tensor:
    """In-place ``sparse_dropout`` of a contiguous tensor the caller owns."""
    return _zero_drawn_(x.mul_(1.0 / (1.0 - p)), p)


def _zero_drawn_(x: torch.Tensor, p: float) -> torch.Tensor:
    """Zero the elements of contiguous ``x`` at ``drop_positions`` (each with probability ``p``), in place."""
    x.view(-1).index_fill_(0, drop_positions(x.numel(), p, x.device), 0.0)
    return x


SPARSE_SDPA = "sen2pro_sparse_dropout_sdpa"


def sparse_dropout_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                             attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                             is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' ``sdpa`` attention, with :func:`sparse_dropout` on the probabilities when ``dropout > 0``.

    ``query, key, value``: ``(batch, heads, L, head_dim)``; ``attention_mask``: what ``sdpa_mask``
    builds (boolean, True = attend, or additive float) or None. Returns ``(batch, L, heads, head_dim)``
    like ``sdpa_attention_forward``. Calls it does not cover go to ``sdpa_attention_forward`` as they are.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    plain = (dropout == 0.0 or query.device.type != "cpu" or kwargs.get("position_bias") is not None
             or (is_causal if is_causal is not None else getattr(module, "is_causal", False))
             or key.shape[1] != query.shape[1] or (attention_mask is not None and attention_mask.ndim != 4))
    if plain:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query, key.transpose(-1, -2)).mul_(scale)
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:  # finfo.min, not -inf: a fully masked row stays finite
            scores.masked_fill_(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores.add_(attention_mask)
    probs = _scale_and_drop_(torch.softmax(scores, dim=-1), dropout)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), None


def _register_sparse_sdpa() -> None:
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(SPARSE_SDPA, sparse_dropout_attention)
    AttentionMaskInterface.register(SPARSE_SDPA, sdpa_mask)


def _module_dropout(module: torch.nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    """The patched ``forward``: ``sparse_dropout`` in training mode, identity in eval mode (as ``nn.Dropout``)."""
    return sparse_dropout(x, float(module.p)) if module.training else x


def _patchable(module: torch.nn.Module) -> bool:
    """A plain element-wise ``nn.Dropout`` (a subclass with its own ``forward`` is left alone)."""
    return isinstance(module, torch.nn.Dropout) and type(module).forward is torch.nn.Dropout.forward


@contextlib.contextmanager
def mc_dropout(encoder: BaseEncoder, fast: bool = True) -> Iterator[None]:
    """The encoder's ``stochastic()`` context, with its dropout drawn by :func:`sparse_dropout`.

    Patches every plain ``nn.Dropout`` module, and switches a config on ``sdpa`` attention to
    :data:`SPARSE_SDPA`. ``fast=False`` (or an encoder without a ``torch.nn.Module`` ``model``, or
    one off CPU) is exactly ``encoder.stochastic()``. Everything is restored on exit, also after an error.
    """
    model = getattr(encoder, "model", None)
    patch = fast and isinstance(model, torch.nn.Module) and encoder.device.type == "cpu"
    patched: list[torch.nn.Module] = []
    config = getattr(model, "config", None) if patch else None
    attention = getattr(config, "_attn_implementation", None)
    with encoder.stochastic():
        try:
            if patch:
                for module in model.modules():
                    if _patchable(module) and "forward" not in module.__dict__:
                        module.forward = functools.partial(_module_dropout, module)
                        patched.append(module)
            if attention == "sdpa":
                _register_sparse_sdpa()
                config._attn_implementation = SPARSE_SDPA
            yield
        finally:
            for module in patched:
                del module.forward
            if attention == "sdpa":
                config._attn_implementation = attention
