"""MC dropout at close to the cost of an eval pass: the same dropout, cheaper random numbers.

On CPU torch draws one Bernoulli per element, which dominates a Sen2Pro pass (docs/speed.md); on CPU only, dropout
and ``sdpa`` attention here draw the POSITIONS of dropped elements instead (Geometric(p) gaps, about ``p * n`` draws).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator

import torch

from sts_lightning.embeddings.encoders.base import BaseEncoder


def drop_positions(n: int, p: float, device: torch.device | str = "cpu", chunk: int | None = None) -> torch.Tensor:
    """Sorted indices in ``[0, n)``, each present with probability ``p``: cumulative sums of Geometric(p) gaps, drawn
    in chunks (the mean + 6 sd: almost always one) until they pass ``n``."""
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
    """Training-mode dropout of ``x`` (same distribution as ``F.dropout(x, p, True)``), fast on CPU; a new tensor."""
    if x.device.type != "cpu":
        return torch.nn.functional.dropout(x, p, True)
    if p == 0.0:
        return x.clone()
    if p == 1.0:
        return torch.zeros_like(x)
    return _zero_drawn_((x * (1.0 / (1.0 - p))).contiguous(), p)


def _zero_drawn_(x: torch.Tensor, p: float) -> torch.Tensor:
    """Zero the elements of contiguous ``x`` at ``drop_positions`` (each with probability ``p``), in place."""
    x.view(-1).index_fill_(0, drop_positions(x.numel(), p, x.device), 0.0)
    return x


SPARSE_SDPA = "sen2pro_sparse_dropout_sdpa"


def sparse_dropout_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                             attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                             is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' ``sdpa`` attention with :func:`sparse_dropout` on the probabilities; ``sdpa_attention_forward``
    gets every call this does not cover."""
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
    probs = _zero_drawn_(torch.softmax(scores, dim=-1).mul_(1.0 / (1.0 - dropout)), dropout)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), None


def _register_sparse_sdpa() -> None:
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(SPARSE_SDPA, sparse_dropout_attention)
    AttentionMaskInterface.register(SPARSE_SDPA, sdpa_mask)


def _module_dropout(module: torch.nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    """The patched ``forward``: ``sparse_dropout`` in training mode, identity in eval mode (as ``nn.Dropout``)."""
    return sparse_dropout(x, float(module.p)) if module.training else x


@contextlib.contextmanager
def mc_dropout(encoder: BaseEncoder, fast: bool = True) -> Iterator[None]:
    """``encoder.stochastic()`` with its dropout drawn by :func:`sparse_dropout` (``fast`` and a torch model on CPU);
    everything is restored on exit."""
    model = getattr(encoder, "model", None)
    patch = fast and isinstance(model, torch.nn.Module) and encoder.device.type == "cpu"
    patched: list[torch.nn.Module] = []
    config = getattr(model, "config", None) if patch else None
    attention = getattr(config, "_attn_implementation", None)
    with encoder.stochastic():
        try:
            if patch:
                for module in model.modules():  # plain nn.Dropout only: a subclass's own forward is left alone
                    plain = isinstance(module, torch.nn.Dropout) and type(module).forward is torch.nn.Dropout.forward
                    if plain and "forward" not in module.__dict__:
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
