"""The cross-view autoencoder meta-embedding as a LightningModule (Poerner et al. 2020, Sec. 3.4).

Trained on the CACHED vectors of frozen sources (``datamodules.source_views``: a list of J tensors per batch). The
sources are rebuilt from their specs when ``scorer()`` is first asked, kept off the module's submodules: frozen, they
must not enter checkpoints. ``export`` writes a meta-embedding directory that ``evaluate.py`` and SED load back.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import torch
from lightning.pytorch import LightningModule, Trainer
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset

from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.io.model_card import TrainingFacts
from sts_lightning.embeddings.isolated_rng import isolated_rng
from sts_lightning.embeddings.methods.cross_view_ae import METHOD
from sts_lightning.embeddings.methods.meta.cross_view_ae_nets import CrossViewAutoencoder
from sts_lightning.embeddings.methods.meta.cross_view_ae_objective import AE_LOSSES
from sts_lightning.embeddings.methods.meta.projections import MetaProjection
from sts_lightning.embeddings.methods.meta.scorer import MetaEmbeddingScorer, save_meta_embedding
from sts_lightning.embeddings.sources.build import build_source
from sts_lightning.lightning_modules.arg_rules import check_args
from sts_lightning.lightning_modules.base import check_finite
from sts_lightning.lightning_modules.optimizers import build_optimizer

log = logging.getLogger(__name__)


class CrossViewAEModule(LightningModule):
    """J encoders + J decoders trained on all J^2 reconstructions; the meta-embedding is ``sum_j E_j(x_j)``.

    ``sources`` are needed only for STS evaluation and export; the defaults are the paper's best (linear, largest d).
    """

    method_info = METHOD.card()

    def __init__(self, sources: Sequence | None = None, dims: Sequence[int] | None = None, d: int | None = None,
                 hidden_layers: int = 0, loss: str = "mse", normalize: bool = True, lr: float = 1e-3,
                 eval_batch_size: int = 64) -> None:
        super().__init__()
        if loss not in AE_LOSSES:
            raise unknown_choice("cross-view AE loss", loss, AE_LOSSES)
        check_args({"lr": lr, "eval_batch_size": eval_batch_size})
        self.save_hyperparameters()
        self.net: CrossViewAutoencoder | None = None
        self._sources: list | None = None
        if dims is not None:
            self._build(list(dims))

    def _build(self, dims: list[int]) -> None:
        d = int(self.hparams.d or max(dims))
        self.hparams.dims, self.hparams.d = [int(x) for x in dims], d  # saved in checkpoints
        self.net = CrossViewAutoencoder(dims, d, self.hparams.hidden_layers, self.hparams.normalize)

    def setup(self, stage: str) -> None:
        if self.net is None:
            datamodule = getattr(self.trainer, "datamodule", None)
            dims = getattr(datamodule, "dims", None)
            if dims is None:
                raise ConfigError("cross-view AE: set model.dims or use data=source_views (which knows them)")
            self._build(list(dims))

    def forward(self, views: Sequence[Tensor]) -> Tensor:
        return self.net.embed(views)

    def training_step(self, batch: Sequence[Tensor], batch_idx: int) -> Tensor:
        terms = self.net.loss_terms(list(batch), self.hparams.loss)
        loss = terms.sum()
        n = int(batch[0].shape[0])
        self.log("train/loss", loss, prog_bar=True, batch_size=n)
        with torch.no_grad():
            self.log("train/self_terms", terms.diagonal().sum(), batch_size=n)
            self.log("train/cross_terms", loss - terms.diagonal().sum(), batch_size=n)
        return loss

    def validation_step(self, batch, batch_idx: int) -> None:
        return None  # the STS callback scores scorer() once per validation

    def on_before_backward(self, loss: Tensor) -> None:
        check_finite(loss, self.global_step)

    def configure_optimizers(self):
        return build_optimizer("adam", self.parameters(), self.hparams.lr, betas=(0.9, 0.999))

    # ----------------------------------------------------------------------------- scoring, export
    def projection(self) -> MetaProjection:
        return MetaProjection("ae", list(self.hparams.dims), {"d": int(self.hparams.d), "loss": self.hparams.loss,
                                                               "hidden_layers": int(self.hparams.hidden_layers)},
                              autoencoder=self.net)

    def _source_specs(self) -> list:
        if not self.hparams.sources:
            raise ConfigError("cross-view AE: model.sources is needed to score or export (the source specs)")
        from omegaconf import OmegaConf

        return [OmegaConf.to_container(s) if not isinstance(s, str | dict) else s for s in self.hparams.sources]

    def sources(self) -> list:
        """The frozen sources, built from their specs once (kept off the module: not in checkpoints)."""
        if self._sources is None:
            self._sources = [build_source(s, batch_size=self.hparams.eval_batch_size) for s in self._source_specs()]
        return self._sources

    def scorer(self):
        return MetaEmbeddingScorer(self.sources(), self.projection())

    def export(self, path: str | os.PathLike, training: TrainingFacts | None = None) -> Path:
        """The meta-embedding export (``save_meta_embedding``), its card naming this method and ``training``, and
        each source's identity: the export refuses to score once a source name means other weights."""
        return save_meta_embedding(path, self.projection(), self._source_specs(), self.method_info, training,
                                   fitted_on=[s.identity() for s in self.sources()])


def fit_cross_view_ae(views: Sequence[Tensor], d: int | None = None, hidden_layers: int = 0, loss: str = "mse",
                      epochs: int = 500, batch_size: int = 10000, lr: float = 1e-3, seed: int = 0,
                      normalize: bool = True) -> MetaProjection:
    """Train on in-memory views with a plain Lightning Trainer (CPU, no logger / checkpoints)."""
    with isolated_rng(seed):  # a pure function of ``seed``; the caller's generators are left as they were
        views = [v.float() for v in views]
        module = CrossViewAEModule(dims=[int(v.shape[1]) for v in views], d=d, hidden_layers=hidden_layers,
                                   loss=loss, normalize=normalize, lr=lr)
        loader = DataLoader(TensorDataset(*views), batch_size=batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(seed))
        trainer = Trainer(max_epochs=epochs, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                          enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
        trainer.fit(module, loader)
        return module.projection()
