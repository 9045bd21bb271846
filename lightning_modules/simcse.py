"""SimCSE (Gao, Yao & Chen, EMNLP 2021): contrastive sentence embeddings from dropout noise or NLI triplets.

Unsupervised (``data=sentences``): each sentence passes twice with dropout on; its two vectors are the positive pair
and every other sentence of the global batch a negative (InfoNCE, ``simcse_loss``). Supervised (``data=nli
data.format=triplets``): premise, entailed hypothesis as the positive, contradicted one as a hard negative.

``pooling`` is ours; ``mlp`` says where SimCSE's ``Linear + tanh`` head sits (``princeton-nlp/SimCSE``): ``train``
(training only, the unsupervised recipe; exported as the encoder with its pooling), ``always`` (also at evaluation,
the supervised recipe; exported as a sentence-transformers ``Dense`` + ``Tanh``) or ``none``. Recipe defaults:
the authors' scripts (configs/model/simcse.yaml, simcse_sup.yaml).

Each step is ``ids -> embed_ids (encoder + pooling + head) -> loss_fn(emb)``, both views in one padded pass, so the
cached loss (``model.mini_batch_size``) can replace the middle.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import ClassVar

from torch import Tensor, nn

from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.io.export_note import EXPORT, LoadingNote, evaluate_command
from sts_lightning.embeddings.methods.shared.grad_cache import EncoderView
from sts_lightning.embeddings.methods.shared.matryoshka import refuse_training_only_head
from sts_lightning.embeddings.methods.simcse import SIMCSE, SIMCSE_SUP
from sts_lightning.embeddings.methods.simcse.objective import simcse_loss
from sts_lightning.embeddings.methods.simcse.scorer import MLPHeadScorer, mlp_head
from sts_lightning.embeddings.scoring.scorer import Scorer
from sts_lightning.lightning_modules.arg_rules import PROBABILITY, check_args, check_value
from sts_lightning.lightning_modules.base import EncoderModule
from sts_lightning.lightning_modules.grad_cache import CachedLoss

log = logging.getLogger(__name__)

OBJECTIVES = ("unsupervised", "supervised")
MLP_MODES = ("train", "always", "none")
VIEWS = {"unsupervised": 2, "supervised": 3}  # texts per training example
BATCH_KEY = {"unsupervised": "sentences", "supervised": "anchors"}
DATA_OF = {"unsupervised": "plain sentences (data=sentences)", "supervised": "NLI triplets (data=nli data.format=triplets)"}
METHOD_INFO = {"unsupervised": SIMCSE.card(), "supervised": SIMCSE_SUP.card()}
DROPOUT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout")


def set_dropout(model: nn.Module, p: float) -> int:
    """Set every ``nn.Dropout`` and the config's dropout probabilities to ``p``; returns how many modules."""
    found = 0
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = float(p)
            found += 1
    for key in DROPOUT_KEYS:
        if isinstance(getattr(model.config, key, None), float):
            setattr(model.config, key, float(p))
    return found


class SimCSEModule(EncoderModule, CachedLoss):
    """SimCSE on plain sentences (unsupervised) or NLI triplets (supervised)."""

    # ONE padded pass: at 32 tokens length-sorted groups were slower on a CPU (docs/speed.md, "Unsupervised SimCSE")
    length_buckets = 1

    matryoshka_ok = SIMCSE.matryoshka_ok  # InfoNCE on each prefix of the exported vector (mlp=none / always)
    training_only_head: ClassVar[tuple[str, str, str]] = SIMCSE.training_only_head  # Matryoshka refused with it

    def __init__(self, model_name_or_path: str = "paraphrase-MiniLM-L3-v2", *, objective: str = "unsupervised",
                 temperature: float = 0.05, mlp: str = "train", dropout: float = 0.1, hard_negative_weight: float = 0.0,
                 pooling: str = "cls", max_length: int | None = 32, lr: float = 3e-5, weight_decay: float = 0.0,
                 warmup_ratio: float = 0.0, **base) -> None:
        if objective not in OBJECTIVES:
            raise unknown_choice("model.objective", objective, OBJECTIVES)
        if mlp not in MLP_MODES:
            raise unknown_choice("model.mlp", mlp, MLP_MODES)
        refuse_training_only_head(base.get("matryoshka_dims"), self.training_only_head, mlp)
        check_args({"temperature": temperature})
        check_value("model.dropout", dropout, PROBABILITY)  # CT's dropout is a switch: not a MODEL_RULES name
        if not math.isfinite(hard_negative_weight) or (hard_negative_weight and objective != "supervised"):
            raise ConfigError(f"model.hard_negative_weight={hard_negative_weight!r} must be finite and needs "
                              "objective=supervised (the unsupervised objective has no hard negatives)")
        super().__init__(model_name_or_path, pooling=pooling, max_length=max_length, lr=lr,
                         weight_decay=weight_decay, warmup_ratio=warmup_ratio, **base)
        self.method_info = METHOD_INFO[objective]
        if set_dropout(self.encoder_model, dropout) == 0 and dropout > 0:
            log.warning("%s has no nn.Dropout modules: the two SimCSE views are identical", model_name_or_path)
        init_std = float(getattr(self.encoder_model.config, "initializer_range", 0.02))
        # mlp=none has no head at all: a parameter without gradients would need DDP's unused-parameter search
        self.mlp = None if mlp == "none" else mlp_head(self.embedding_dim, init_std)

    # token ids made in the DataLoader's workers (unsupervised: sentences; supervised: the triplet's three fields)
    text_fields = ("sentences", "anchors", "positives", "negatives")

    # ------------------------------------------------------------------------------ representation
    def embed_ids(self, ids: Sequence[Sequence[int]]) -> Tensor:
        """Pooled vectors through the head (when training uses one), WITH gradients."""
        emb = super().embed_ids(ids)
        return emb if self.mlp is None else self.mlp(emb)

    def view(self, ids: Sequence[Sequence[int]]) -> EncoderView:
        """What ``embed_ids`` computes, for the cached loss (``model.mini_batch_size``): the head folded into the pooling."""
        if self.mlp is None:
            return super().view(ids)
        mlp, pool = self.mlp, self.pool
        return EncoderView(self._live_encoder(), lambda batch: mlp(pool(batch)), ids)

    def scorer(self) -> Scorer:
        """The evaluated vector: the pooling, through the head only with ``mlp=always``."""
        if self.hparams.mlp != "always":
            return super().scorer()
        return MLPHeadScorer(self._live_encoder(), self.mlp, self.hparams.pooling,
                             batch_size=self.hparams.eval_batch_size)

    # ------------------------------------------------------------------------------------ training
    def training_texts(self, batch: dict) -> list[str]:
        """The flat list one forward pass embeds: ``[s; s]`` (two dropout views) or ``[anchors; pos; neg]``."""
        return self._flat(batch, lambda field: list(batch[field]))

    def training_ids(self, batch: dict) -> list[list[int]]:
        """``training_texts`` as token ids, from the DataLoader's workers (``text_fields``)."""
        return self._flat(batch, lambda field: self.batch_ids(batch, field))

    def _flat(self, batch: dict, get) -> list:
        objective = self.hparams.objective
        if BATCH_KEY[objective] not in batch:
            raise ConfigError(f"model.objective={objective} needs {DATA_OF[objective]}; got batches with keys "
                              f"{sorted(batch)}: set data / data.format accordingly")
        if objective == "unsupervised":
            sentences = get("sentences")
            return [*sentences, *sentences]
        return [*get("anchors"), *get("positives"), *get("negatives")]

    def loss_fn(self, emb: Tensor) -> Tensor:
        """SimCSE's loss of ``embed_ids(training_ids(batch))``, against the candidates of every rank."""
        views = emb.chunk(VIEWS[self.hparams.objective], dim=0)
        return simcse_loss(views[0], views[1], views[2] if len(views) == 3 else None,
                           temperature=self.hparams.temperature,
                           hard_negative_weight=self.hparams.hard_negative_weight)

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        if not self.encoder_model.training:  # dropout is the unsupervised objective's only noise: enforce it
            self.encoder_model.train()
        ids = self.training_ids(batch)
        n = len(ids) // VIEWS[self.hparams.objective]
        # a last batch of ONE sentence (unsupervised) has no negative: loss 0, no update; not worth an error
        loss = self.embed_and_loss(ids, self.with_matryoshka(self.loss_fn))  # cached (GradCache) when model.mini_batch_size is set
        self.log("train/loss", loss, prog_bar=True, batch_size=n)
        return loss

    # -------------------------------------------------------------------------------------- export
    def export_head(self) -> nn.Linear | None:
        """SimCSE's MLP where it is evaluated (``mlp=always``): a sentence-transformers ``Dense(Tanh)``."""
        return self.mlp[0] if self.hparams.mlp == "always" else None

    def loading_note(self, why_not: str | None) -> LoadingNote:
        hp = self.hparams
        if hp.mlp != "always":
            note = super().loading_note(why_not)
            if hp.mlp == "train":
                return LoadingNote(note.what + " SimCSE's MLP was used in training only (the unsupervised recipe) "
                                   "and is not part of the export.", note.command, why_not)
            return note
        spec = f"{{name:simcse_mlp,path:{EXPORT},pooling:{hp.pooling}}}"
        return LoadingNote(f"{type(self).__name__}: a Hugging Face encoder (`AutoModel.from_pretrained`); sentence "
                           f"vector = tanh(W x + b) of its `{hp.pooling}` pooling x (SimCSE's MLP, the "
                           "sentence-transformers `Dense` module), compared by cosine.",
                           evaluate_command([EXPORT], spec), why_not)
