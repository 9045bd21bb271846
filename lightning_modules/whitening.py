"""BERT-whitening (Su et al. 2021): mean and whitening matrix of FROZEN pooled vectors, fitted in one pass.

A LightningModule for a closed form, so cached vectors, STS evaluation, checkpoints, DDP and the export come with
the trainer. Each step adds the batch's float64 moment sums to buffers (summed across ranks), so every checkpoint
holds the whole fit; ``mu`` and ``W`` are formed when a scorer or the export asks. ``configure_optimizers`` returns
``None`` so ``global_step`` still counts batches; ``ddp_anchor`` exists because DDP needs a trainable parameter.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

import torch
from lightning.pytorch import LightningModule

from sts_lightning.embeddings.encoders.load import encoder_hidden_size
from sts_lightning.embeddings.io.export_note import EXPORT, LoadingNote, evaluate_command
from sts_lightning.embeddings.io.model_card import ModelCard, TrainingFacts
from sts_lightning.embeddings.methods.pooling import PoolingScorer, get_pooling
from sts_lightning.embeddings.methods.whitening.maths import MomentSums, check_k, fit_whitening, moment_sums
from sts_lightning.embeddings.methods.whitening.scorer import (
    BERT_WHITENING,
    Whitening,
    WhiteningScorer,
    save_whitening_export,
)
from sts_lightning.embeddings.scoring.scorer import Scorer
from sts_lightning.lightning_modules.arg_rules import check_args
from sts_lightning.lightning_modules.frozen_encoder import ENCODER_KEYS, FrozenEncoderMixin

log = logging.getLogger(__name__)
# Lightning's warnings about what this module leaves out on purpose (no optimizer, no loss, nothing to clip).
QUIET = (r"`LightningModule.configure_optimizers` returned `None`", r"`parameters` is an empty generator")


class WhiteningModule(FrozenEncoderMixin, LightningModule):
    """Moment sums of ``[vectors]`` batches (``CachedEmbeddingDataModule``); ``k``: top-k directions kept."""

    feature_keys = ENCODER_KEYS

    def __init__(self, model_name_or_path: str = "all-MiniLM-L6-v2", pooling: str = "first_last_avg",
                 max_length: int | None = None, embedding_dim: int | None = None, k: int | None = None,
                 eval_batch_size: int = 64) -> None:
        super().__init__()
        for message in QUIET:  # this module means to have no optimizer and no loss
            warnings.filterwarnings("ignore", message=message)
        self.save_hyperparameters()
        get_pooling(pooling)  # fail now, not at the first evaluation
        check_args({"max_length": max_length, "eval_batch_size": eval_batch_size})
        dim = int(embedding_dim) if embedding_dim is not None else encoder_hidden_size(str(model_name_or_path))
        self.hparams.embedding_dim = dim
        check_k(k, dim)  # one line naming model.k before any vector is encoded
        # Buffers, not attributes: they are the fit, saved in checkpoints and restored on resume.
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("total", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("outer", torch.zeros(dim, dim, dtype=torch.float64))
        # DDP refuses to wrap a module without a trainable parameter: this one only carries the zero loss
        self.ddp_anchor = torch.nn.Parameter(torch.zeros(()))
        self._encoder = None  # not an nn.Module: stays out of the state dict

    @property
    def sums(self) -> MomentSums:
        return MomentSums(self.count, self.total, self.outer)

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        """Add the batch's moment sums (all ranks': one all-reduce of ``1 + d + d^2`` float64); a zero "loss" on
        ``ddp_anchor``, since Lightning refuses a ``None`` step under DDP."""
        x = batch[0] if isinstance(batch, (list, tuple)) else batch
        with torch.autocast(device_type=x.device.type, enabled=False):
            flat = moment_sums(x).flat()
        flat = self.trainer.strategy.reduce(flat, reduce_op="sum") if self._trainer is not None else flat
        added = MomentSums.unflat(flat, self.total.shape[0])
        self.count += added.count
        self.total += added.total
        self.outer += added.outer
        if self._trainer is not None:  # already identical on every rank: no sync
            self.log("train/vectors", float(self.count), prog_bar=True, batch_size=x.shape[0])
        return self.ddp_anchor * 0.0

    def configure_optimizers(self):
        """No optimizer: Lightning's mock one still counts each batch as a step (see the module docstring)."""
        return None

    # -------------------------------------------------------------------------------- fit
    def whitening(self) -> Whitening:
        """``(mu, W)`` of the vectors seen so far, float32; below 2 vectors (no covariance) the plain pooling:
        ``mu = 0``, ``W`` the first ``k`` columns of the identity."""
        if float(self.count) < 2:
            log.warning("whitening fitted on %d vectors (< 2): using the identity map, i.e. the plain pooling",
                        int(self.count))
            dim = self.total.shape[0]
            mean = torch.zeros(dim, dtype=torch.float64, device=self.total.device)
            matrix = torch.eye(dim, dtype=torch.float64, device=self.total.device)[:, :check_k(self.hparams.k, dim)]
        else:
            mean, matrix = fit_whitening(self.sums, self.hparams.k)
        config = {k: self.hparams[k] for k in ENCODER_KEYS}
        config.update(model_name_or_path=str(config["model_name_or_path"]), k=self.hparams.k, encoder=None,
                      fitted_vectors=int(self.count))
        return Whitening(mean.float(), matrix.float(), config)

    def scorer(self) -> Scorer:
        """Cosine of the whitened vectors; the plain pooling while fewer than 2 vectors were seen."""
        encoder = self.frozen_encoder()
        if float(self.count) < 2:
            return PoolingScorer(encoder, self.hparams.pooling)
        return WhiteningScorer(encoder, self.whitening(), batch_size=self.hparams.eval_batch_size)

    def export(self, path: str | os.PathLike, training: TrainingFacts | None = None) -> Path:
        """``whitening_config.json`` (with the encoder's identity) and ``whitening.safetensors``, and the card."""
        hp = self.hparams
        whitening = self.whitening()
        name = str(hp.model_name_or_path)
        whitening.config["encoder"] = self.fitted_on()
        k = "all" if hp.k is None else hp.k
        note = LoadingNote(f"BERT-whitening of the frozen `{name}` (`{hp.pooling}` pooling, k = {k}, fitted on "
                           f"{int(self.count)} vectors): the sentence vector is `(x - mu) @ W`, compared by cosine.",
                           evaluate_command([name], f"{{name:whitening,path:{EXPORT}}}", hp.max_length),
                           "the whitening has no sentence-transformers module")
        card = ModelCard(BERT_WHITENING, (name,), note, training)
        return save_whitening_export(path, whitening, card)
