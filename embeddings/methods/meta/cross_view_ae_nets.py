"""The cross-view autoencoder of sentence meta-embeddings (Poerner et al. 2020, Sec. 3.4) and its losses.

Every source j has an encoder ``E_j: R^{d_j} -> R^d`` and a decoder ``D_j: R^d -> R^{d_j}``; training
reconstructs EVERY view ``x_j'`` from EVERY code ``E_j(x_j)``: J^2 loss terms,
``L = sum_j sum_j' l(x_j', D_j'(E_j(x_j)))``. The meta-embedding is ``sum_j E_j(x_j)``. Why all J^2
terms: the diagonal alone lets each encoder keep its own view's private structure; the cross terms force
the codes of one sentence to agree across sources, which is what makes the sum a shared representation.

Reconstruction losses (Neill & Bollegala 2018, as listed in the paper): ``mse``, ``mae``, ``kld``
(KL(softmax(x) || softmax(x_hat)), the vectors read as logits) and ``cos2`` ((1 - cos)^2). Inputs are
length-normalised first (``normalize=True``), as for conc / avg, so no source dominates by its scale.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.methods.meta.projections import l2_normalize

AE_LOSSES = ("mse", "mae", "kld", "cos2")
NET_KEYS = ("dims", "d", "hidden_layers", "normalize")


def reconstruction_loss(target: Tensor, pred: Tensor, kind: str) -> Tensor:
    """Mean over the batch of one reconstruction term (``mse`` / ``mae`` average over dimensions too)."""
    if kind == "mse":
        return F.mse_loss(pred, target)
    if kind == "mae":
        return F.l1_loss(pred, target)
    if kind == "kld":
        return F.kl_div(F.log_softmax(pred, -1), F.log_softmax(target, -1), reduction="batchmean", log_target=True)
    if kind == "cos2":
        return ((1.0 - F.cosine_similarity(pred, target, dim=-1)) ** 2).mean()
    raise unknown_choice("cross-view AE loss", kind, AE_LOSSES)


def _mlp(inputs: int, outputs: int, hidden_layers: int) -> nn.Sequential:
    """``hidden_layers`` = 0: one linear map (the paper's best); else tanh hidden layers of ``outputs`` units."""
    sizes = [inputs, *([outputs] * hidden_layers), outputs]
    parts: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        parts.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            parts.append(nn.Tanh())
    return nn.Sequential(*parts)


class CrossViewAutoencoder(nn.Module):
    """Per-source encoders and decoders; ``embed`` is the meta-embedding, ``loss`` the J^2 objective.

    Args:
        dims: source dimensions ``d_j``, in source order.
        d: meta-embedding dimension.
        hidden_layers: hidden layers in every encoder and decoder (0: linear maps).
        normalize: length-normalise every input view (and so every reconstruction target).
    """

    def __init__(self, dims: Sequence[int], d: int, hidden_layers: int = 0, normalize: bool = True) -> None:
        super().__init__()
        if not dims or d < 1 or hidden_layers < 0:
            raise ConfigError(f"cross-view AE needs >= 1 source, d >= 1, hidden_layers >= 0; got {dims}, {d}, "
                              f"{hidden_layers}")
        self.dims, self.d = [int(x) for x in dims], int(d)
        self.hidden_layers, self.normalize = int(hidden_layers), bool(normalize)
        self.encoders = nn.ModuleList(_mlp(dj, self.d, self.hidden_layers) for dj in self.dims)
        self.decoders = nn.ModuleList(_mlp(self.d, dj, self.hidden_layers) for dj in self.dims)

    def config(self) -> dict:
        return {"dims": self.dims, "d": self.d, "hidden_layers": self.hidden_layers, "normalize": self.normalize}

    def _inputs(self, views: Sequence[Tensor]) -> list[Tensor]:
        if len(views) != len(self.dims):
            raise ConfigError(f"the autoencoder has {len(self.dims)} sources, got {len(views)} views")
        views = [v.float() for v in views]
        return [l2_normalize(v) for v in views] if self.normalize else views

    def embed(self, views: Sequence[Tensor]) -> Tensor:
        """``sum_j E_j(x_j)``: the meta-embedding ``(n, d)``."""
        return sum(enc(x) for enc, x in zip(self.encoders, self._inputs(views), strict=True))

    def loss_terms(self, views: Sequence[Tensor], kind: str = "mse") -> Tensor:
        """``(J, J)`` matrix: entry ``[j, j']`` reconstructs view ``j'`` from the code of view ``j``."""
        xs = self._inputs(views)
        codes = [enc(x) for enc, x in zip(self.encoders, xs, strict=True)]
        return torch.stack([torch.stack([reconstruction_loss(xs[k], self.decoders[k](code), kind)
                                         for k in range(len(xs))]) for code in codes])

    def loss(self, views: Sequence[Tensor], kind: str = "mse") -> Tensor:
        return self.loss_terms(views, kind).sum()
