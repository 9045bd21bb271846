"""Sentence Ensemble Distillation (Carlsson & Sahlgren): one student regresses onto N teachers' mean.

The student embeds each sentence by mean pooling its final layer and is trained with the MSE between
that vector and the mean of the frozen teachers' vectors (paper Eq. 1-2; the targets come precomputed
from ``datamodules.distillation``). Recipe (paper Sec. 5.1): Adam(W), batch 32, lr 2e-5, 10% linear
warm-up, ~100k Wikipedia sentences. Only the student is updated. The defaults here are what
``python train.py model=sed`` measured (configs/model/sed.yaml): lr 1e-4 and ``eval_layers=1`` on the
paraphrase-MiniLM-L3-v2 student, where the paper's 2e-5 barely moved it and its last-2 average started lower.

Why two poolings: the paper trains on the final layer's mean but EVALUATES the student by mean pooling
over the average of its last 2 layers (Appendix A.3: 2 beats 1 almost always; 2 vs 3 is mixed), so
``train_pooling`` drives the loss and ``eval_layers`` (1, 2 or 3 -> the base's ``pooling`` = ``mean``,
``last2_avg`` or ``last3_avg``) drives ``scorer()`` and STS validation.

Export: ``EncoderModule.export`` writes the Hugging Face model plus sentence-transformers files that
reproduce the EVALUATED pooling, so ``SentenceTransformer(export).encode`` gives the vectors STS validation
scored for every ``eval_layers``: 2 and 3 become ``WeightedLayerPooling`` over the last layers, then mean
pooling (``embeddings.io.st_export``). ``evaluate.py encoders=[<export>] scorers=[last2_avg]`` (the command is
in the export's ``LOADING.md``) scores the same vectors.
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
from sts_lightning.lightning_modules.base import EncoderModule, embed_length_buckets

EVAL_POOLING = {1: "mean", 2: "last2_avg", 3: "last3_avg"}


class SEDModule(EncoderModule):
    """The SED student (batches ``{"sentences", "targets"}`` from ``datamodules.distillation``).

    Args:
        train_pooling: the student vector regressed onto the targets (``mean``: final layer, the paper).
        eval_layers: 1, 2 or 3 final layers averaged (then mean over tokens) for ``scorer()`` and export
            (paper: 2; here 1, which measured better on paraphrase-MiniLM-L3-v2: configs/model/sed.yaml). Sets the
            base's ``pooling`` hyper-parameter.
        pooling: ``None`` (the default: from ``eval_layers``), or the pooling ``eval_layers`` makes (a checkpoint's
            hyper-parameters hold it); named here, not left to ``**base``, so the configs' node
            (``runs/constructor_defaults.py``) does not offer the base's ``mean`` default for it.
        lr: 1e-4 (paper: 2e-5, which barely moves the L3 student; configs/model/sed.yaml has the measurements).
        weight_decay: 0, as the paper's Adam.
        base: ``EncoderModule``'s other arguments (no ``mini_batch_size``: the MSE is per sentence, so
            ``trainer.accumulate_grad_batches`` already bounds its memory).
    """

    method_info = METHOD.card()
    matryoshka_refused = ("regresses the vector onto the teachers' mean by MSE; the MSE of a prefix is a subset of "
                          "the same squared differences, so Matryoshka would only weigh the leading dimensions more "
                          "(the full loss already fits every prefix to the teachers' prefix)")

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
