"""SBERT-WK (Wang & Kuo 2020): training-free sentence vectors by dissecting a transformer's layers.

Each token's states over layers ``layer_start..L`` are fused with weights from their alignment (inverse) and novelty
against a window of neighbouring layers; tokens are averaged with weights from how much they change across layers.
``variant="code"`` is the authors' code, ``"paper"`` the paper where they disagree (docs/results/sbert_wk.md).
Instead of a QR per window, a closed form from the float64 Gram matrix (whose Cholesky factor is ``R``).
One usable token gives its own vector; none raises ``DataError``; under 3 fused layers, ConfigError.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Sequence

import torch

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.encoders.token_batch import TokenBatch
from sts_lightning.embeddings.errors import ConfigError, DataError, UnsupportedError, unknown_choice
from sts_lightning.embeddings.scoring.reading import Reading, pooled_reading
from sts_lightning.embeddings.scoring.scorer import Representation, VectorScorer

VARIANTS = ("code", "paper")
MIN_FUSED_LAYERS = 3  # the word-importance variance needs >= 2 adjacent-layer cosines


def context_windows(n_layers: int, window: int, variant: str) -> list[list[int]]:
    """Context layer indices of each layer position k (centre excluded), left then right."""
    layers = list(range(n_layers))
    if variant == "code":  # Python slice semantics, exactly as the authors index their array
        return [layers[k - window : k] + layers[k + 1 : k + window + 1] for k in layers]
    return [layers[max(0, k - window) : k] + layers[k + 1 : k + window + 1] for k in layers]


def check_config(num_layers: int, layer_start: int, window: int, omega: float, variant: str,
                 source: str = "encoder") -> None:
    """Raise ConfigError for settings where SBERT-WK is undefined, naming the fix."""
    if variant not in VARIANTS:
        raise unknown_choice("SBERT-WK variant", variant, VARIANTS)
    if isinstance(window, bool) or not isinstance(window, numbers.Integral) or window < 1:
        raise ConfigError(f"SBERT-WK window must be an integer >= 1, got {window!r}")
    if not 0.0 <= float(omega) <= 1.0:
        raise ConfigError(f"SBERT-WK omega must lie in [0, 1], got {omega!r}")
    if num_layers < MIN_FUSED_LAYERS:
        raise UnsupportedError(
            f"SBERT-WK fuses a transformer's layers; {source} has {num_layers} hidden-state layer(s) "
            f"(static word vectors have 1), it needs at least {MIN_FUSED_LAYERS}")
    if not 0 <= layer_start < num_layers:
        raise ConfigError(f"SBERT-WK layer_start={layer_start} is outside the {num_layers} layers of {source} "
                          f"(0 = embedding output, {num_layers - 1} = last)")
    n = num_layers - layer_start
    if n < MIN_FUSED_LAYERS:
        raise ConfigError(
            f"SBERT-WK layer_start={layer_start} leaves {n} of the {num_layers} layers of {source}; word "
            f"importance is a variance over adjacent layers and needs >= {MIN_FUSED_LAYERS}: "
            f"use layer_start <= {num_layers - MIN_FUSED_LAYERS}")
    empty = [k for k, ctx in enumerate(context_windows(n, window, variant)) if not ctx]
    if empty:
        raise ConfigError(
            f"SBERT-WK window={window} over {n} fused layers leaves layer position(s) {empty} with no "
            f"context (the code's wrapping lower slice is empty there), so alignment is 0/0; choose "
            f"another window or layer_start, or variant='paper'")


def _selected_tokens(batch: TokenBatch, variant: str) -> torch.Tensor:
    """``(batch, tokens)`` bool: the tokens that make up each sentence in this variant."""
    real = batch.attention_mask.bool()
    if variant == "paper":
        return real & ~batch.special_tokens_mask.bool()
    positions = torch.arange(real.shape[1], device=real.device)
    return positions.unsqueeze(0) < (batch.lengths - 1).unsqueeze(1)  # first len-1 positions


def window_groups(n_layers: int, window: int, variant: str) -> list[tuple[list[int], list[list[int]]]]:
    """Layer positions grouped by the size of their context window: ``[(positions, their contexts)]``.

    Windows of one size stack into one tensor: one batched Cholesky per group, not one per position.
    """
    groups: dict[int, tuple[list[int], list[list[int]]]] = {}
    for k, ctx in enumerate(context_windows(n_layers, window, variant)):
        positions, contexts = groups.setdefault(len(ctx), ([], []))
        positions.append(k)
        contexts.append(ctx)
    return list(groups.values())


def _layer_weights(gram: torch.Tensor, window: int, omega: float, variant: str) -> torch.Tensor:
    """``(tokens, layers)`` fusion weights from per-token Gram matrices ``(tokens, layers, layers)``."""
    n = gram.shape[-1]
    norms = gram.diagonal(dim1=-2, dim2=-1).sqrt()  # (N, n): |v_k|
    inv_align, novelty = torch.empty_like(norms), torch.empty_like(norms)
    for positions, contexts in window_groups(n, window, variant):
        k = torch.tensor(positions, device=gram.device)  # (K,) centres
        ctx = torch.tensor(contexts, device=gram.device)  # (K, w) their context layers
        # chol^T = R[:-1, :-1] of the QR of each window [context..., centre]: (N, K, w, w)
        chol, info = torch.linalg.cholesky_ex(gram[:, ctx.unsqueeze(-1), ctx.unsqueeze(-2)])
        if bool(info.any()):
            bad = contexts[int(info.ne(0).any(0).nonzero()[0])]
            raise DataError(f"SBERT-WK: some token has linearly dependent states in fused layers {bad}")
        cross = gram[:, ctx, k.unsqueeze(-1)]  # (N, K, w): <c_j, v>
        r_top = torch.linalg.solve_triangular(chol, cross.unsqueeze(-1), upper=False).squeeze(-1)
        proj = r_top.norm(dim=-1)  # |P_C v| = |R[:-1, -1]|
        centre = norms[:, k]  # (N, K): |v|
        # |v - P_C v| = |R[-1, -1]|; clamped so a centre inside the context span gives 0, not NaN.
        novelty[:, k] = (centre**2 - proj**2).clamp_min(0).sqrt() / centre
        cos_num = cross / norms[:, ctx]  # <c_j/|c_j|, v>
        if variant == "code":
            inv_align[:, k] = 1.0 / (cos_num.mean(-1) / proj * (ctx.shape[1] + 1) * 2)
        else:
            inv_align[:, k] = 1.0 / (cos_num.mean(-1) / centre)
    alpha = (omega * inv_align / inv_align.sum(1, keepdim=True)
             + (1.0 - omega) * novelty / novelty.sum(1, keepdim=True))
    return alpha / alpha.sum(1, keepdim=True)


def sbert_wk_pool(batch: TokenBatch, layer_start: int = 4, window: int = 2, omega: float = 0.5,
                  variant: str = "code") -> torch.Tensor:
    """SBERT-WK sentence vectors ``(batch, hidden)`` of one right-padded batch, vectorised over all its tokens;
    ``window`` is the context half-width m, ``omega`` weighs inverse alignment against novelty (Eq. 9)."""
    check_config(batch.num_layers, layer_start, window, omega, variant, source="the batch")
    keep = _selected_tokens(batch, variant)
    counts = keep.sum(1)
    if bool((counts == 0).any()):
        rows = torch.nonzero(counts == 0).flatten().tolist()
        raise DataError(f"SBERT-WK: sentence(s) at batch row(s) {rows} have no token left "
                        f"({'only special tokens' if variant == 'paper' else 'fewer than 2 tokens'})")
    layers = batch.hidden_states[layer_start:]
    n_sent, width, hidden = layers[0].shape
    flat = keep.flatten().nonzero().squeeze(1)  # selected tokens as rows of (batch * tokens): no padding
    sent = torch.div(flat, width, rounding_mode="floor")
    # Token-major (N, n, H) float64, written layer by layer: products of float32 values are exact in
    # float64, so the Gram (one batched matmul) carries only the summation's rounding.
    states = torch.empty(flat.numel(), len(layers), hidden, dtype=torch.float64, device=flat.device)
    for k, h in enumerate(layers):
        states[:, k] = h.reshape(-1, hidden).index_select(0, flat)
    gram = states @ states.transpose(1, 2)  # (N, n, n)
    alpha = _layer_weights(gram, window, float(omega), variant)  # (N, n)
    d = gram.diagonal(dim1=-2, dim2=-1)
    adjacent = gram.diagonal(offset=1, dim1=-2, dim2=-1) / (d[:, :-1] * d[:, 1:]).sqrt()
    variance = adjacent.var(dim=-1, correction=0)
    total = torch.zeros(n_sent, dtype=variance.dtype, device=variance.device).index_add_(0, sent, variance)
    uniform = 1.0 / counts.to(variance.dtype)
    weight = torch.where(total[sent] > 0, variance / total[sent].clamp_min(1e-300), uniform[sent])
    # Token weight x layer weight, then ONE (N, 1, n) @ (N, n, H): each token's share of its sentence.
    tokens = ((weight.unsqueeze(1) * alpha).unsqueeze(1) @ states).squeeze(1)
    out = torch.zeros(n_sent, hidden, dtype=tokens.dtype, device=tokens.device).index_add_(0, sent, tokens)
    return out.to(layers[0].dtype)


class SBERTWKScorer(VectorScorer):
    """SBERT-WK sentence vectors compared by cosine (a layered encoder; static word vectors are rejected)."""

    name = "sbert_wk"

    def __init__(self, encoder: BaseEncoder, layer_start: int | str = "auto", window: int = 2, omega: float = 0.5,
                 variant: str = "code", batch_size: int | None = None) -> None:
        if layer_start == "auto":
            # The paper's 4 where the model has room (>= 6 layers), else the deepest start that still
            # leaves MIN_FUSED_LAYERS layers (paraphrase-MiniLM-L3-v2: 1).
            layer_start = max(0, min(4, encoder.num_layers - MIN_FUSED_LAYERS))
        check_config(encoder.num_layers, layer_start, window, omega, variant, source=f"encoder {encoder.name!r}")
        self.encoder = encoder
        self.layer_start, self.window, self.omega, self.variant = layer_start, window, omega, variant
        self.batch_size = batch_size
        self.pool = functools.partial(sbert_wk_pool, layer_start=layer_start, window=window, omega=omega,
                                      variant=variant)

    def reading(self) -> Reading:
        """SBERT-WK's vector with its settings in the name: another setting is another reading (and cache key)."""
        return pooled_reading(f"sbert_wk(layer_start={self.layer_start},window={self.window},omega={self.omega},"
                              f"variant={self.variant})", self.pool)

    def from_pooled(self, x: torch.Tensor) -> Representation:
        return {"embedding": x}

    def represent(self, sentences: Sequence[str]) -> Representation:
        return self.from_pooled(self.encoder.encode(sentences, self.pool, batch_size=self.batch_size,
                                                    desc=f"{self.name} encode"))  # type: ignore[arg-type]
