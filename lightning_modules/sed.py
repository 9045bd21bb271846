"""Sentence Ensemble Distillation (Carlsson & Sahlgren): one student regresses onto N teachers' mean.

The student's pooled vector is trained with the MSE to the mean of the frozen teachers' vectors (paper Eq. 1-2;
targets precomputed by ``datamodules.distillation``). Why two poolings: the paper trains on the final layer's mean
but evaluates the mean over the last layers (Appendix A.3), so ``train_pooling`` drives the loss and ``eval_layers``
(1, 2, 3 -> ``mean``, ``last2_avg``, ``last3_avg``) drives ``scorer()``, STS validation and the export. The defaults
(lr 1e-4, ``eval_layers=1``) measured best on the packaged student.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.pooling import get_pooling
from sts_lightning.embeddings.methods.sed import METHOD
from sts_lightning.embeddings.methods.sed.objective import check_dims, sed_loss
from sts_lightning.lightning_modules.base import EncoderModule
from sts_lightning.lightning_modules.length_buckets import embed_length_buckets

EVAL_POOLING = {1: "mean", 2: "last2_avg", 3: "last3_avg"}


class SEDModule(EncoderModule):
    """The SED student; ``eval_layers`` (paper: 2) sets the base's ``pooling`` (``None``: from ``eval_layers``)."""

    method_info = METHOD.card()
    matryoshka_refused = METHOD.matryoshka_refused

    def __init__(self, model_name_or_path: str = "paraphrase-MiniLM-L3-v2", *, train_pooling: str = "mean",
                 eval_layers: int = 1, lr: float = 1e-4, weight_decay: float = 0.0, pooling: str | None = None,
                 **base) -> None:
        if eval_layers not in EVAL_POOLING:
            raise ConfigError(f"eval_layers must be 1, 2 or 3 (final layers averaged at evaluation), got {eval_layers!r}")
        get_pooling(train_pooling)
        derived = EVAL_POOLING[int(eval_layers)]
        if pooling not in (None, derived):  # a checkpoint's hparams hold the pooling eval_layers made
            raise ConfigError(f"SED sets its pooling from model.eval_layers ({eval_layers} -> {derived}): "
                              "set eval_layers, not pooling")
        pooling = derived  # the hyper-parameters (read from this frame by save_hyperparameters) hold the derived one
        super().__init__(model_name_or_path, pooling=pooling, lr=lr, weight_decay=weight_decay, **base)
        self.train_pool = get_pooling(train_pooling)

    text_fields = ("sentences",)  # tokenized in the DataLoader's workers

    def embed_train(self, sentences: Sequence[str]) -> Tensor:
        """Student vectors WITH gradients under the TRAINING pooling (``embed`` uses the eval pooling)."""
        return self.embed_train_ids(self.tokenize(sentences))

    def embed_train_ids(self, ids: Sequence[Sequence[int]]) -> Tensor:
        """``embed_train`` of tokenized sentences (the training step's come from the loader's workers)."""
        return embed_length_buckets(self._live_encoder(), self.train_pool, ids, self.forward_groups())

    def on_fit_start(self) -> None:
        """Compare sizes before the first step when the datamodule knows its target size."""
        datamodule = getattr(self.trainer, "datamodule", None)
        target_dim = getattr(datamodule, "target_dim", None) if datamodule is not None else None
        if target_dim is not None:
            check_dims(self.embedding_dim, target_dim)

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        sentences, target = batch["sentences"], batch["targets"]
        check_dims(self.embedding_dim, target.shape[-1])  # a shape compare: cheap at every step
        student = self.embed_train_ids(self.batch_ids(batch, "sentences")).float()  # fp32 loss under mixed precision
        target = target.to(device=student.device, dtype=torch.float32)
        loss = sed_loss(student, target)
        with torch.no_grad():
            cosine = F.cosine_similarity(student, target, dim=-1).mean()
        self.log("train/loss", loss, prog_bar=True, batch_size=len(sentences))
        self.log("train/cosine", cosine, batch_size=len(sentences))
        return loss
