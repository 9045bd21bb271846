"""BERT-flow (Li et al., EMNLP 2020): a Glow trained by maximum likelihood on FROZEN sentence vectors.

Mapping BERT's anisotropic sentence vectors to an isotropic Gaussian with an invertible flow, trained unsupervised
on the target domain, makes cosine in the latent space a better similarity (recipe: paper Sec. 4). Not an
``EncoderModule``: the encoder never changes (``FrozenEncoderMixin``); batches are cached vectors.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch
from lightning.pytorch import LightningModule
from torch import Tensor

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.encoders.load import encoder_hidden_size
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.export_note import EXPORT, LoadingNote, evaluate_command
from sts_lightning.embeddings.io.model_card import ModelCard, TrainingFacts
from sts_lightning.embeddings.methods.flow.glow import Glow
from sts_lightning.embeddings.methods.flow.objective import flow_nll_loss
from sts_lightning.embeddings.methods.flow.scorer import BERT_FLOW, FLOW_KEYS, FlowScorer, save_flow_export
from sts_lightning.embeddings.methods.pooling import get_pooling
from sts_lightning.lightning_modules.arg_rules import check_args
from sts_lightning.lightning_modules.base import check_finite
from sts_lightning.lightning_modules.frozen_encoder import ENCODER_KEYS, FrozenEncoderMixin
from sts_lightning.lightning_modules.optimizers import build_optimizer

log = logging.getLogger(__name__)


class BertFlowModule(FrozenEncoderMixin, LightningModule):
    """Glow over frozen pooled sentence vectors, batches ``[vectors]`` from ``CachedEmbeddingDataModule`` (whose
    encoder arguments it must match); ``embedding_dim`` (``None``: the encoder's) is a multiple of ``2**levels``."""

    feature_keys = ENCODER_KEYS

    def __init__(self, model_name_or_path: str = "all-MiniLM-L6-v2", pooling: str = "first_last_avg",
                 max_length: int | None = None, embedding_dim: int | None = None, levels: int = 3,
                 depth: int = 3, hidden: int = 32, coupling: str = "affine", permutation: str = "lu",
                 lr: float = 1e-3, eval_batch_size: int = 64) -> None:
        super().__init__()
        self.save_hyperparameters()
        get_pooling(pooling)  # fail now, not at the first evaluation
        check_args({"lr": lr, "max_length": max_length, "eval_batch_size": eval_batch_size})
        if embedding_dim is None:
            self.hparams.embedding_dim = encoder_hidden_size(str(model_name_or_path))
        try:
            self.flow = Glow(int(self.hparams.embedding_dim), levels=levels, depth=depth, hidden=hidden,
                             coupling=coupling, permutation=permutation)
        except ValueError as err:
            raise ConfigError(str(err)) from err
        self._encoder: BaseEncoder | None = None  # not an nn.Module: stays out of state dict and optimizer

    def forward(self, x: Tensor) -> Tensor:
        """The latent ``z`` of pooled vectors ``(batch, dim)`` (the representation), in float32."""
        with torch.autocast(device_type=x.device.type, enabled=False):
            return self.flow(x.float())[0]

    def training_step(self, batch, batch_idx: int) -> Tensor:
        x = batch[0] if isinstance(batch, (list, tuple)) else batch
        loss = flow_nll_loss(self.flow, x)
        check_finite(loss, self.global_step)
        self.log("train/loss", loss, prog_bar=True, batch_size=x.shape[0])
        return loss

    def configure_optimizers(self):
        return build_optimizer("adam", self.flow.parameters(), self.hparams.lr)

    # -------------------------------------------------------------------------------- scoring
    def scorer(self) -> FlowScorer:
        """Cosine over the live flow's ``z`` (the STS callback switches eval mode)."""
        return FlowScorer(self.frozen_encoder(), self.flow, pooling=self.hparams.pooling,
                          batch_size=self.hparams.eval_batch_size)

    def export(self, path: str | os.PathLike, training: TrainingFacts | None = None) -> Path:
        """``flow_config.json`` and ``flow.safetensors``, atomically, with ``LOADING.md`` and the model card."""
        hp = self.hparams
        config = {k: hp[k] for k in (*ENCODER_KEYS, *FLOW_KEYS)}
        config["model_name_or_path"] = str(config["model_name_or_path"])
        config["encoder"] = self.fitted_on()  # what makes the export refuse any other encoder
        note = LoadingNote(f"BERT-flow: a Glow on the frozen `{config['model_name_or_path']}` "
                           f"(`{hp.pooling}` pooling); the sentence vector is the flow's latent z, compared by cosine.",
                           evaluate_command([config["model_name_or_path"]], f"{{name:flow,path:{EXPORT}}}",
                                            hp.max_length),
                           "the Glow has no sentence-transformers module")
        card = ModelCard(BERT_FLOW, (config["model_name_or_path"],), note, training)
        return save_flow_export(path, self.flow, config, card)
