"""Similarity functions on aligned rows; pure tensor functions, always computed in float32."""

from __future__ import annotations

import torch

EPS = 1e-12


def cosine_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine of a[i] and b[i]. A zero vector (e.g. a sentence of out-of-vocabulary words) scores 0."""
    a, b = a.float(), b.float()
    num = (a * b).sum(-1)
    den = a.norm(dim=-1) * b.norm(dim=-1)
    return num / den.clamp_min(EPS)
