"""The padding-free forward: the sentences of a batch packed into ONE sequence, attention kept within each sentence.

Dense work runs on real tokens only, so batches can be cut by a token budget without paying for padding. For
``sdpa`` models with absolute learned positions (BERT, MiniLM, e5): ``input_ids`` ``(1, N)``, ``position_ids``
restarting per sentence, the config switched to :data:`PACKED` for the call. Attention: each sentence's q / k / v
gathered into a padded view and one masked SDPA (exact); on CUDA in fp16 / bf16 without dropout, ``varlen_attn``
where torch has it (a failure recorded in :data:`VARLEN_STATE`). Outputs keep the padded ``TokenBatch`` contract.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

PACKED = "sts_packed_sdpa"
PACKABLE_MODEL_TYPES = ("bert",)  # absolute positions from 0, no token-type dependence we would change
VARLEN_STATE = {"usable": True, "reason": ""}  # set False (with the error) the first time varlen_attn fails


@dataclass
class PackedLayout:
    """Where each sentence of a packed batch sits, computed once per batch on the host and copied once."""

    lengths: list[int]
    longest: int
    gather: torch.Tensor  # (batch, longest): packed index of each padded position (0 for padding; masked out)
    flat: torch.Tensor  # (N,): index of each packed token in the flattened (batch * longest) padded grid
    key_mask: torch.Tensor | None  # (batch, 1, 1, longest) bool, True for real keys; None when no row is padded
    cu_seqlens: torch.Tensor  # (batch + 1,) int32 cumulative lengths (the varlen kernel's input)
    attention_mask: torch.Tensor  # (batch, longest) long, the padded path's mask

    @property
    def tokens(self) -> int:
        return int(self.flat.shape[0])


def to_device(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Host -> device without a sync: pinned memory and a non-blocking copy on CUDA, as is elsewhere."""
    if device.type == "cuda":
        return x.pin_memory().to(device, non_blocking=True)
    return x.to(device)


def pack_ids(ids: Sequence[Sequence[int]], device: torch.device) -> tuple[torch.Tensor, torch.Tensor, PackedLayout]:
    """``(input_ids (1, N), position_ids (1, N), layout)`` for token-id lists (built on the host, copied once)."""
    lengths = [len(x) for x in ids]
    longest, rows = max(lengths), len(lengths)
    flat_ids = torch.tensor([t for seq in ids for t in seq], dtype=torch.long)
    positions = torch.cat([torch.arange(n) for n in lengths])
    real = torch.arange(longest).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)  # (rows, longest)
    offsets = torch.tensor([0, *lengths]).cumsum(0)
    gather = (offsets[:-1].unsqueeze(1) + torch.arange(longest).unsqueeze(0)).where(real, torch.zeros((), dtype=torch.long))
    flat = real.reshape(-1).nonzero().squeeze(1)
    padded = min(lengths) < longest
    layout = PackedLayout(
        lengths=lengths, longest=longest, gather=to_device(gather, device), flat=to_device(flat, device),
        key_mask=to_device(real.view(rows, 1, 1, longest), device) if padded else None,
        cu_seqlens=to_device(offsets.to(torch.int32), device), attention_mask=to_device(real.long(), device))
    return to_device(flat_ids.unsqueeze(0), device), to_device(positions.unsqueeze(0), device), layout


_LAYOUT: contextvars.ContextVar[PackedLayout | None] = contextvars.ContextVar("sts_packed_layout", default=None)


def _varlen(query, key, value, layout: PackedLayout, scaling: float | None) -> torch.Tensor | None:
    """The flash varlen kernel on ``(N, heads, dim)`` views, or ``None`` where it does not apply / failed once."""
    if not VARLEN_STATE["usable"] or query.device.type != "cuda" or query.dtype not in (torch.float16, torch.bfloat16):
        return None
    if scaling is not None and abs(scaling - query.shape[-1] ** -0.5) > 1e-12:
        return None  # the kernel's default scale only: no keyword whose name changed between torch versions
    try:
        from torch.nn.attention.varlen import varlen_attn

        q, k, v = (x[0].transpose(0, 1).contiguous() for x in (query, key, value))
        return varlen_attn(q, k, v, layout.cu_seqlens, layout.cu_seqlens, layout.longest, layout.longest)
    except (ImportError, RuntimeError, TypeError, ValueError) as err:
        VARLEN_STATE.update(usable=False, reason=f"{type(err).__name__}: {err}"[:300])
        return None


def packed_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                     is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """Block-diagonal attention of a packed ``(1, heads, N, dim)`` batch -> ``(1, N, heads, dim)``; any other call
    (another model's, a causal or cross attention) goes to transformers' ``sdpa`` unchanged."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    layout = _LAYOUT.get()
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", False)
    if (layout is None or causal or query.shape[0] != 1 or query.shape[2] != layout.tokens
            or key.shape[2] != layout.tokens or key.shape[1] != query.shape[1]):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    if dropout == 0.0:
        out = _varlen(query, key, value, layout, scaling)
        if out is not None:
            return out.unsqueeze(0), None
    heads, dim = query.shape[1], query.shape[-1]

    def padded(x: torch.Tensor) -> torch.Tensor:  # (1, heads, N, dim) -> (batch, heads, longest, dim)
        return x[0][:, layout.gather].transpose(0, 1)

    out = F.scaled_dot_product_attention(padded(query), padded(key), padded(value), attn_mask=layout.key_mask,
                                         dropout_p=dropout, scale=scaling)
    out = out.transpose(1, 2).reshape(-1, heads, dim).index_select(0, layout.flat)
    return out.unsqueeze(0), None


def _register() -> None:
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(PACKED, packed_attention)
    AttentionMaskInterface.register(PACKED, sdpa_mask)


def packing_unsupported(model: torch.nn.Module) -> str | None:
    """Why ``model`` cannot run packed (``None``: it can): the architecture and attention it needs."""
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    if kind not in PACKABLE_MODEL_TYPES:
        return f"model type {kind!r} is not packable (positions / attention of {', '.join(PACKABLE_MODEL_TYPES)} only)"
    attention = getattr(config, "_attn_implementation", None)
    if attention not in ("sdpa", PACKED):
        return f"attention {attention!r} (packing replaces 'sdpa' only)"
    if getattr(config, "is_decoder", False):
        return "a decoder (causal attention)"
    return None


@contextlib.contextmanager
def packed_forward(model: torch.nn.Module, layout: PackedLayout) -> Iterator[None]:
    """The model's attention is :func:`packed_attention` for ``layout`` inside the block; restored after it."""
    _register()
    config = model.config
    before = config._attn_implementation
    token = _LAYOUT.set(layout)
    config._attn_implementation = PACKED
    try:
        yield
    finally:
        config._attn_implementation = before
        _LAYOUT.reset(token)
