"""Contrastive Tension (Carlsson et al., ICLR 2021): two copies of one encoder pulled apart and together.

Model 1 embeds side A and model 2 side B of each text pair (both start from the same checkpoint); the logit is
their dot product, trained with binary cross-entropy: identical pairs -> 1, different sentences -> 0. The defaults
are the reference code's recipe (FreddeFrallan/Contrastive-Tension): 16 pairs with 2 positives, RMSprop with Keras'
settings, max length 75, dropout off, its step-wise learning rate (``scheduler=step``). The copy kept is whichever
scores better on the STS dev set at the last evaluation.

Each batch's ``sentences`` are the pool the pairs are drawn from, seeded by ``(seed, rank, step)``: the same pairs
after a resume. ``objective=in_batch`` is the authors' in-batch-negatives variant (sentence-transformers'
``ContrastiveTensionLossInBatchNegatives``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from sts_lightning.embeddings.encoders.hf import HFEncoder
from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.io.model_card import TrainingFacts
from sts_lightning.embeddings.methods.ct import METHOD
from sts_lightning.embeddings.methods.ct.objective import (
    ct_logits,
    ct_loss,
    in_batch_tension_loss,
    make_ct_pairs,
    pair_rng,
    per_label_losses,
    split_views,
)
from sts_lightning.embeddings.methods.pooling import PoolingScorer
from sts_lightning.embeddings.methods.shared.grad_cache import EncoderView
from sts_lightning.embeddings.scoring.scorer import Scorer
from sts_lightning.lightning_modules.activation_checkpointing import (
    checkpoint_in_eval_mode,
    enable_gradient_checkpointing,
)
from sts_lightning.lightning_modules.arg_rules import check_args
from sts_lightning.lightning_modules.base import SCHEDULERS, EncoderModule
from sts_lightning.lightning_modules.ct_options import (
    CT_TRAINABLE,
    freeze_bottom,
    length_matched_groups,
    train_only_word_embeddings,
    with_embedding_lr,
)
from sts_lightning.lightning_modules.ct_selection import check_select_task, select_copy
from sts_lightning.lightning_modules.grad_cache import CachedLoss
from sts_lightning.lightning_modules.length_buckets import embed_length_buckets
from sts_lightning.lightning_modules.optimizers import build_optimizer
from sts_lightning.lightning_modules.row_sparse_rmsprop import RowSparseRMSprop, sparse_grads_pay

log = logging.getLogger(__name__)

CT_SCHEDULERS = (*SCHEDULERS, "step")
CT_OBJECTIVES = ("bce", "in_batch")
CT_VIEWS = ("identical", "halves", "mixed_halves")


def per_device_layout(pairs: int, positives: int, world_size: int) -> tuple[int, int]:
    """``(pairs, positives)`` of one rank, divided exactly: the 1:7 ratio must hold on every rank, and a rank
    without a positive would only learn to push sentences apart."""
    if world_size < 1 or pairs % world_size or positives % world_size:
        raise ConfigError(f"CT needs pairs={pairs} and positives={positives} divisible by world_size={world_size}: "
                          "change model.pairs / model.positives or the number of devices")
    return pairs // world_size, positives // world_size


class ContrastiveTensionModule(EncoderModule, CachedLoss):
    """CT on plain sentences (batches from ``datamodules.sentences``); ``encoder_model`` is model 1.

    ``pairs``/``positives`` are GLOBAL per optimizer step; ``select_task``'s Spearman picks the copy kept. ``views``
    other than ``identical`` (the paper) give each copy one half of a sentence (``split_views``); ``trainable``,
    ``frozen_layers``, ``length_groups``, ``embedding_lr`` and ``span_words`` are ours (``ct_options``).
    """

    method_info = METHOD.card()
    schedulers = CT_SCHEDULERS
    matryoshka_ok = METHOD.matryoshka_ok

    def __init__(self, model_name_or_path: str = "paraphrase-MiniLM-L3-v2", *, pairs: int = 16, positives: int = 2,
                 seed: int = 0, dropout: bool = False, final_lr: float = 2e-6, lr_step_every: int = 500,
                 lr_drops: int = 4, rmsprop_alpha: float = 0.9, rmsprop_eps: float = 1e-7,
                 select_task: str = "stsb-dev", objective: str = "bce", scale: float = 20.0, views: str = "identical",
                 embedding_lr: float | None = None, span_words: int | None = None,
                 frozen_layers: int | None = None, length_groups: int = 1, trainable: str = "all",
                 max_length: int | None = 75, lr: float = 1e-5, weight_decay: float = 0.0, warmup_ratio: float = 0.0,
                 optimizer: str = "rmsprop", scheduler: str = "step", **base) -> None:
        if objective not in CT_OBJECTIVES:
            raise unknown_choice("CT objective", objective, CT_OBJECTIVES)
        if views not in CT_VIEWS:
            raise unknown_choice("CT views", views, CT_VIEWS)
        if span_words is not None and (views == "identical" or span_words < 1):
            raise ConfigError(f"model.span_words={span_words!r} needs views=halves or mixed_halves and a positive "
                              "number of words (null = whole halves)")
        check_args({"length_groups": length_groups, "embedding_lr": embedding_lr})
        mini_batch_size = base.get("mini_batch_size")
        if mini_batch_size is not None and objective != "in_batch":
            raise ConfigError(f"model.mini_batch_size={mini_batch_size!r} applies to objective=in_batch only (bce has "
                              "no in-batch negatives)")
        super().__init__(model_name_or_path, max_length=max_length, lr=lr, weight_decay=weight_decay,
                         warmup_ratio=warmup_ratio, optimizer=optimizer, scheduler=scheduler, **base)
        hp = self.hparams
        per_device_layout(pairs, positives, 1)
        if scheduler == "step" and warmup_ratio > 0:
            raise ConfigError("scheduler=step has no warm-up (as in the reference): set warmup_ratio=0")
        if trainable not in CT_TRAINABLE:
            raise unknown_choice("model.trainable", trainable, CT_TRAINABLE)
        if trainable != "all" and frozen_layers is not None:
            raise ConfigError(f"model.trainable={trainable} freezes the layers itself: leave model.frozen_layers=null")
        if length_groups > 1 and objective != "in_batch":
            raise ConfigError(f"model.length_groups={length_groups} applies to objective=in_batch only")
        if scheduler == "step" and (lr_step_every < 1 or lr_drops < 0 or not 0 < final_lr <= lr):
            raise ConfigError(f"step schedule needs lr_step_every >= 1, lr_drops >= 0 and 0 < final_lr <= lr, "
                              f"got {lr_step_every}, {lr_drops}, {final_lr} (lr={lr})")
        # Model 2: a second, independent copy loaded from the same checkpoint (plain-scalar hparams only).
        self.encoder2 = HFEncoder.from_pretrained(str(model_name_or_path), max_length=max_length,
                                                  batch_size=hp.eval_batch_size)
        self.encoder2_model = self.encoder2.model
        if getattr(self.encoder2_model, "pooler", None) is not None:
            self.encoder2_model.pooler.requires_grad_(False)  # unused, as for model 1 (see base)
        if hp.gradient_checkpointing:
            enable_gradient_checkpointing(self.encoder2_model)
        for model in (self.encoder_model, self.encoder2_model):
            freeze_bottom(model, frozen_layers)
            if trainable == "word_embeddings":
                train_only_word_embeddings(model)
        self._set_dropout()
        # Which copy is kept (1 or 2): a buffer so checkpoints, load_from_checkpoint and export agree.
        self.register_buffer("selected_copy", torch.tensor(1, dtype=torch.long))
        self._eval_copy: int | None = None  # forces scorer() to one copy while both are evaluated (ct_selection)

    # ------------------------------------------------------------------------------ the two copies
    def _set_dropout(self) -> None:
        """Dropout off = both HF models in eval mode; gradients flow regardless of the mode (checkpointing too)."""
        for model in (self.encoder_model, self.encoder2_model):
            model.train(bool(self.hparams.dropout))
            if not self.hparams.dropout:
                checkpoint_in_eval_mode(model)

    def embed2_ids(self, ids: list[list[int]]) -> Tensor:
        """``embed_ids`` of model 2 (one shared tokenizer)."""
        self.encoder2.device = self.device
        return embed_length_buckets(self.encoder2, self.pool, ids, self.forward_groups())

    def view2(self, ids: list[list[int]]) -> EncoderView:
        """``view`` of model 2."""
        self.encoder2.device = self.device
        return EncoderView(self.encoder2, self.pool, ids)

    def pair_ids(self, batch: dict, texts1: list[str], texts2: list[str]) -> tuple[list, list]:
        """Token ids of both sides: the workers' (identical views), or tokenized here (halves exist per step)."""
        if self.hparams.views != "identical":
            return self.tokenize(texts1), self.tokenize(texts2)
        known = dict(zip(batch["sentences"], self.batch_ids(batch, "sentences"), strict=True))
        return [known[t] for t in texts1], [known[t] for t in texts2]

    def scorers(self) -> dict[str, Scorer]:
        """Both copies as scorers, e.g. to compare them outside training."""
        return {f"model{c}": self._copy_scorer(c) for c in (1, 2)}

    def _copy_scorer(self, copy: int) -> Scorer:
        encoder = self._live_encoder() if copy == 1 else self.encoder2
        encoder.device = self.device
        return PoolingScorer(encoder, self.hparams.pooling, batch_size=self.hparams.eval_batch_size)

    def scorer(self) -> Scorer:
        """The kept copy (model 1 until an evaluation has found model 2 better)."""
        return self._copy_scorer(self._eval_copy or int(self.selected_copy))

    # ------------------------------------------------------------------------------------ training
    text_fields = ("sentences",)  # the pool the pairs are drawn from, tokenized in the DataLoader's workers

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        hp = self.hparams
        self._set_dropout()  # Lightning may have switched modes (e.g. after validation): enforce it per step
        if hp.objective == "in_batch":
            return self._in_batch_step(batch, pair_rng(hp.seed, self.global_rank, self.global_step))
        pairs, positives = per_device_layout(hp.pairs, hp.positives, self._trainer.world_size if self._trainer is not None else 1)
        rng = pair_rng(hp.seed, self.global_rank, self.global_step)
        texts1, texts2, labels = make_ct_pairs(batch["sentences"], rng, batch_size=pairs, positives=positives)
        if hp.views != "identical":
            texts1, texts2 = split_views(texts1, texts2, rng, mixed=hp.views == "mixed_halves",
                                         span_words=hp.span_words)
        ids1, ids2 = self.pair_ids(batch, texts1, texts2)
        emb1, emb2 = self.embed_ids(ids1).float(), self.embed2_ids(ids2).float()  # fp32: unbounded dots
        logits = ct_logits(emb1, emb2)
        labels = labels.to(logits.device, non_blocking=True)  # no stream sync on a GPU
        loss = ct_loss(logits, labels) if self.matryoshka is None else \
            self.with_matryoshka(lambda e1, e2: ct_loss(ct_logits(e1, e2), labels))(emb1, emb2)
        pos_loss, neg_loss = per_label_losses(logits.detach(), labels)
        self.log("train/pos_loss", pos_loss, batch_size=pairs)
        self.log("train/neg_loss", neg_loss, batch_size=pairs)
        self.log("train/loss", loss, prog_bar=True, batch_size=pairs)
        return loss

    def _in_batch_step(self, batch: dict, rng: np.random.Generator) -> Tensor:
        """Both copies embed the same sentences (or their two halves); the rest of the global batch are negatives."""
        sentences = batch["sentences"]
        if len(sentences) < 2:
            raise ConfigError("objective=in_batch needs at least 2 sentences per device batch (data.batch_size)")
        views = self.hparams.views
        texts1, texts2 = ((sentences, sentences) if views == "identical"
                          else split_views(sentences, sentences, rng, mixed=views == "mixed_halves",
                                           span_words=self.hparams.span_words))
        groups = length_matched_groups(sentences, self.hparams.length_groups)
        scale = self.hparams.scale

        def loss_fn(emb1: Tensor, emb2: Tensor) -> Tensor:
            emb1, emb2 = emb1.float(), emb2.float()
            return torch.stack([in_batch_tension_loss(emb1[g], emb2[g], scale=scale) for g in groups]).mean()

        ids1, ids2 = self.pair_ids(batch, texts1, texts2)
        loss = self.views_and_loss([self.view(ids1), self.view2(ids2)], self.with_matryoshka(loss_fn))
        self.log("train/loss", loss, prog_bar=True, batch_size=len(sentences))
        return loss

    def _param_groups(self) -> list[dict]:
        """The base's groups; with ``embedding_lr`` the word-embedding matrices of both copies get their own."""
        return with_embedding_lr(super()._param_groups(), self.named_parameters(), self.hparams.embedding_lr)

    def _rmsprop(self, groups: list[dict]) -> torch.optim.Optimizer:
        """RMSprop with Keras' smoothing/epsilon; row-sparse embedding updates where ``sparse_embedding_grads``."""
        hp = self.hparams
        sparse = self.sparse_embedding_grads()
        for model in (self.encoder_model, self.encoder2_model):
            model.get_input_embeddings().sparse = sparse
        kind = RowSparseRMSprop if sparse else torch.optim.RMSprop
        log.info("CT optimizer: %s (word-embedding gradients %s)", kind.__name__, "row-sparse" if sparse else "dense")
        return build_optimizer("rmsprop", groups, hp.lr, rmsprop=kind, alpha=hp.rmsprop_alpha, eps=hp.rmsprop_eps)

    def sparse_embedding_grads(self) -> bool:
        """Whether both copies' word embeddings get sparse gradients and ``RowSparseRMSprop`` updates (a CT batch
        holds a few hundred of the 30k tokens, so dense embedding updates are most of a CPU step)."""
        return sparse_grads_pay(self._trainer, self.device, self.hparams.weight_decay)

    def _schedule_options(self) -> dict:
        """The reference's ``step`` schedule: ``lr_drops`` equal drops to ``final_lr``, one every ``lr_step_every``."""
        hp = self.hparams
        return {"final_lr": hp.final_lr, "step_every": hp.lr_step_every, "drops": hp.lr_drops}

    # ---------------------------------------------------------------------------------- selection
    def on_fit_start(self) -> None:
        check_select_task(self.trainer, self.hparams.select_task)

    def on_validation_epoch_start(self) -> None:
        """Score both copies and keep the better one (``ct_selection.select_copy``)."""
        select_copy(self)

    # -------------------------------------------------------------------------------------- export
    def export(self, path: str | os.PathLike, training: TrainingFacts | None = None) -> Path:
        """Export the kept copy (the base writes ``self.encoder_model``: point it at model 2 meanwhile)."""
        if int(self.selected_copy) == 1:
            return super().export(path, training)
        model1 = self._modules["encoder_model"]
        self._modules["encoder_model"] = self.encoder2_model
        try:
            return super().export(path, training)
        finally:
            self._modules["encoder_model"] = model1
