"""SimCSE's MLP head, kept at evaluation by the supervised recipe (exported as ``Dense(Tanh)``), and the scorer that
evaluates through it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.export_manifest import verify_export
from sts_lightning.embeddings.methods.pooling import get_pooling
from sts_lightning.embeddings.scoring.scorer import Representation, VectorScorer


def mlp_head(dim: int, init_std: float = 0.02) -> nn.Sequential:
    """SimCSE's ``MLPLayer``: ``Linear(dim, dim)`` then ``tanh``, initialised as BERT's linear layers (``cl_init``)."""
    head = nn.Sequential(nn.Linear(dim, dim), nn.Tanh())
    nn.init.normal_(head[0].weight, std=init_std)
    nn.init.zeros_(head[0].bias)
    return head


class MLPHeadScorer(VectorScorer):
    """Pooled vector (``pooling``, SimCSE: ``cls``) through ``head`` in fp32, compared by cosine."""

    def __init__(self, encoder: BaseEncoder, head: nn.Module, pooling: str = "cls",
                 batch_size: int | None = None) -> None:
        self.encoder, self.head, self.pooling = encoder, head, pooling
        self.pool_fn = get_pooling(pooling)  # not ``pool``: shared_pass would skip the head
        self.batch_size = batch_size
        self.name = f"{pooling}+mlp"

    def _pool_and_head(self, batch) -> torch.Tensor:
        x = self.pool_fn(batch)
        param = next(self.head.parameters())
        with torch.autocast(device_type=param.device.type, enabled=False):
            return self.head(x.to(device=param.device, dtype=param.dtype)).float()

    def represent(self, sentences: Sequence[str]) -> Representation:
        emb = self.encoder.encode(sentences, self._pool_and_head, batch_size=self.batch_size,
                                  desc=f"{self.name} encode")
        return {"embedding": emb.cpu()}  # type: ignore[union-attr]


def load_dense_head(path: str | Path) -> nn.Sequential:
    """The ``Dense(Tanh)`` module of a sentence-transformers export as ``Linear`` + ``Tanh`` (CPU, eval); else ConfigError."""
    from sentence_transformers.sentence_transformer.modules import Dense

    folder = Path(path).expanduser()
    modules = folder / "modules.json"
    if not modules.is_file():
        raise ConfigError(f"{folder} is not a SimCSE export with an MLP: no modules.json")
    verify_export(folder)
    dense = [m for m in json.loads(modules.read_text()) if m.get("type", "").endswith(".Dense")]
    if len(dense) != 1:
        raise ConfigError(f"{folder}: expected one Dense module (SimCSE's MLP) in modules.json, found {len(dense)}")
    module = Dense.load(str(folder / dense[0]["path"]))
    if not isinstance(module.activation_function, nn.Tanh):
        raise ConfigError(f"{folder}: the Dense module's activation is {module.activation_function!r}, "
                          "SimCSE's MLP uses Tanh")
    return nn.Sequential(module.linear, nn.Tanh()).eval()


class SimCSEExportScorer(MLPHeadScorer):
    """Registry entry ``{name: simcse_mlp, path: <export dir>}``: an export's encoder, pooling, then its MLP."""

    def __init__(self, encoder: BaseEncoder, path: str, pooling: str = "cls", batch_size: int | None = None) -> None:
        head = load_dense_head(path).to(getattr(encoder, "device", "cpu"))
        super().__init__(encoder, head, pooling=pooling, batch_size=batch_size)
