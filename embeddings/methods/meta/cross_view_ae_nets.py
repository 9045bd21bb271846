"""The cross-view autoencoder of sentence meta-embeddings (Poerner et al. 2020, Sec. 3.4): its nets."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.meta.cross_view_ae_objective import cross_view_loss_terms
from sts_lightning.embeddings.methods.meta.projections import l2_normalize

NET_KEYS = ("dims", "d", "hidden_layers", "normalize")


def _mlp(inputs: int, outputs: int, hidden_layers: int) -> nn.Sequential:
    """``hidden_layers`` = 0: one linear map (the paper's best); else tanh hidden layers of ``outputs`` units."""
    sizes = [inputs, *([outputs] * hidden_layers), outputs]
    parts: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        parts += [nn.Linear(sizes[i], sizes[i + 1]), nn.Tanh()]
    return nn.Sequential(*parts[:-1])


class CrossViewAutoencoder(nn.Module):
    """Per source j an encoder ``E_j: R^{d_j} -> R^d`` and a decoder ``D_j``; ``embed`` is the meta-embedding
    ``sum_j E_j(x_j)``, ``loss`` the J^2 objective (``cross_view_ae_objective``)."""

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
        return cross_view_loss_terms(xs, codes, self.decoders, kind)

    def loss(self, views: Sequence[Tensor], kind: str = "mse") -> Tensor:
        return self.loss_terms(views, kind).sum()
