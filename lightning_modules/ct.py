"""Contrastive Tension (Carlsson et al., ICLR 2021): two copies of one encoder pulled apart and together.

Model 1 and model 2 start from the same checkpoint and are updated independently. Model 1 embeds side A
and model 2 side B of each text pair; the logit is their dot product (mean pooling), trained with binary
cross-entropy: identical pairs -> 1, pairs of different sentences -> 0. Recipe (paper Sec. 3 and the
reference code FreddeFrallan/Contrastive-Tension, ``ContrastiveTension/Training.py``): batch 16 pairs with
2 positives (``negative_k=7``), RMSprop with Keras defaults (rho 0.9, epsilon 1e-7), max length 75,
dropout OFF (``training=False`` in ``predictAndUpdate``), and the learning rate of
``_setOptimizerWithStepWiseLinearLearningRate``: ``PiecewiseConstantDecay([500, 1000, 1500, 2000],
[1e-5, 8e-6, 6e-6, 4e-6, 2e-6])`` (``scheduler="step"`` here). The model kept is whichever copy scores
better on the STS dev set at the last evaluation.

Pairs: each training batch ``{"sentences"}`` is the pool that ``make_ct_pairs`` samples the pairs from
(uniformly, with replacement), seeded by ``(seed, global_rank, global_step)`` so a step's pairs do not
depend on history (deterministic and identical after a resume). The reference samples from the whole
corpus instead; a data batch larger than the pair batch (e.g. 32) brings the pool closer to that.

``objective="in_batch"`` is the CT authors' in-batch-negatives variant (sentence-transformers'
``ContrastiveTensionLossInBatchNegatives``): model 1 and model 2 embed the SAME data batch, the diagonal
of their cosine matrix x ``scale`` is the positive, every other sentence of the global batch (gathered
across ranks) a negative, symmetric cross-entropy. ``pairs`` / ``positives`` do not apply to it.
``mini_batch_size`` caches it (GradCache, ``embeddings.methods.shared.grad_cache``): both copies embed their side in
mini-batches, so a large in-batch CT batch needs the activation memory of a mini-batch.

DDP: ``pairs`` and ``positives`` are GLOBAL (16 and 2); every rank builds ``pairs // world_size`` pairs
with ``positives // world_size`` positives from its own shard of sentences (so 2 ranks: 8 pairs, 1
positive each; 4 ranks is an error as 2 positives do not split). The loss has no in-batch negatives, so
DDP's gradient average of per-rank means is the global mean.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from lightning.pytorch.strategies import SingleDeviceStrategy
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
from sts_lightning.embeddings.scoring.protocols import STSEvaluator
from sts_lightning.embeddings.scoring.scorer import Scorer
from sts_lightning.lightning_modules.activation_checkpointing import (
    checkpoint_in_eval_mode,
    enable_gradient_checkpointing,
)
from sts_lightning.lightning_modules.arg_rules import check_args
from sts_lightning.lightning_modules.base import SCHEDULERS, EncoderModule, embed_length_buckets
from sts_lightning.lightning_modules.ct_options import (
    CT_TRAINABLE,
    freeze_bottom,
    length_matched_groups,
    train_only_word_embeddings,
)
from sts_lightning.lightning_modules.optimizers import build_optimizer
from sts_lightning.lightning_modules.row_sparse_rmsprop import RowSparseRMSprop

log = logging.getLogger(__name__)

CT_SCHEDULERS = (*SCHEDULERS, "step")
CT_OBJECTIVES = ("bce", "in_batch")
CT_VIEWS = ("identical", "halves", "mixed_halves")


def per_device_layout(pairs: int, positives: int, world_size: int) -> tuple[int, int]:
    """``(pairs, positives)`` of one rank: the global numbers divided by the world size, exactly.

    Why exact: the 1:7 positive ratio must hold on every rank, and a rank without a positive would only
    learn to push sentences apart.
    """
    if world_size < 1 or pairs % world_size or positives % world_size:
        raise ConfigError(f"CT needs pairs={pairs} and positives={positives} divisible by world_size={world_size}: "
                          "change model.pairs / model.positives or the number of devices")
    return pairs // world_size, positives // world_size




class ContrastiveTensionModule(EncoderModule):
    """CT on plain sentences (batches from ``datamodules.sentences``); ``encoder_model`` is model 1.

    Args:
        pairs, positives: GLOBAL pairs per optimizer step and identical pairs among them (16 and 2).
        seed: seeds the pair sampling together with rank and step.
        dropout: keep dropout on while training (the paper turns it off).
        scheduler: ``step`` (the reference's schedule), ``linear`` or ``constant`` (see ``EncoderModule``).
        final_lr, lr_step_every, lr_drops: the ``step`` schedule (2e-6, every 500 steps, 4 drops).
        rmsprop_alpha, rmsprop_eps: RMSprop's smoothing and epsilon (Keras defaults 0.9 and 1e-7).
        select_task: STS task (of the STS callback) whose Spearman picks the copy to keep and export.
        objective: ``bce`` (the paper: dot-product logits, 1:7 pairs) or ``in_batch`` (in-batch negatives).
        scale: cosine scale of ``in_batch`` (sentence-transformers' 20).
        views: ``identical`` (the paper: a positive is one sentence seen by both copies) or ``halves``
            (ours: model 1 sees the left, model 2 the right part of each sentence; see ``split_views``) or
            ``mixed_halves`` (the same, with a coin flip per sentence for which copy sees which side).
        frozen_layers: ``k`` freezes both copies' embeddings and their first ``k`` transformer layers (``0``:
            embeddings only; ``None``: nothing); see ``freeze_bottom``.
        trainable: ``all`` or ``word_embeddings`` (ours, from scratch: both copies' word-embedding matrices
            only; see ``train_only_word_embeddings``).
        length_groups: ``in_batch`` only: sort each device batch by length and split it into this many groups,
            negatives only within a group (see ``length_matched_groups``).
        span_words: with halves, keep at most this many words next to the cut on each side, lengths drawn
            independently (``None``: whole halves); see ``split_views``.
        embedding_lr: learning rate of both copies' word-embedding matrices (``None``: ``lr``). Why (ours,
            for training from scratch): a token's embedding row gets a gradient only in steps whose batch
            holds it, so at lr 1e-4 a word seen 20 times moves ~0.002 against an init std of 0.02 and
            co-occurrence is never learned; a larger lr for the (sparse) rows only leaves the layers' lr alone.
        max_length, lr, weight_decay, warmup_ratio, optimizer, scheduler: as ``EncoderModule``, with the
            reference's values (75, 1e-5, 0, 0, ``rmsprop``, ``step``).
        base: ``EncoderModule``'s other arguments; ``mini_batch_size``: ``in_batch`` only, sentences per forward
            pass of the cached loss (``None``: uncached); ``gradient_checkpointing``: both copies (also with
            dropout off, i.e. in eval mode).
    """

    method_info = METHOD.card()
    schedulers = CT_SCHEDULERS

    cached_loss = True  # in_batch
    matryoshka_ok = True  # model.matryoshka_dims: both objectives on each (normalised) prefix, as sentence-transformers

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
        self._eval_copy: int | None = None  # forces scorer() to one copy while both are evaluated

    # ------------------------------------------------------------------------------ the two copies
    def _set_dropout(self) -> None:
        """Dropout off = both HF models in eval mode; gradients flow regardless of the mode (checkpointing too)."""
        for model in (self.encoder_model, self.encoder2_model):
            model.train(bool(self.hparams.dropout))
            if not self.hparams.dropout:
                checkpoint_in_eval_mode(model)

    def embed2(self, sentences: list[str]) -> Tensor:
        """Pooled vectors of model 2 WITH gradients (``embed`` is model 1)."""
        return self.embed2_ids(self.tokenize(sentences))

    def embed2_ids(self, ids: list[list[int]]) -> Tensor:
        """``embed2`` of tokenized sentences (both copies share one tokenizer: the loader's workers made the ids)."""
        self.encoder2.device = self.device
        return embed_length_buckets(self.encoder2, self.pool, ids, self.forward_groups())

    def view2(self, ids: list[list[int]]) -> EncoderView:
        """Tokenized sentences as ``embed2_ids`` sees them (``view`` is model 1)."""
        self.encoder2.device = self.device
        return EncoderView(self.encoder2, self.pool, ids)

    def pair_ids(self, batch: dict, texts1: list[str], texts2: list[str]) -> tuple[list, list]:
        """Token ids of both sides: looked up in the pool's worker-made ids (identical views), or tokenized here
        (``views=halves`` / ``mixed_halves`` cut sentences per step, so their text exists only in the step)."""
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
        groups = super()._param_groups()
        if self.hparams.embedding_lr is None:
            return groups
        embeddings = [p for n, p in self.named_parameters() if n.endswith("word_embeddings.weight") and p.requires_grad]
        chosen = {id(p) for p in embeddings}
        for group in groups:
            group["params"] = [p for p in group["params"] if id(p) not in chosen]
        return [*groups, {"params": embeddings, "weight_decay": 0.0, "lr": float(self.hparams.embedding_lr)}]

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
        """Whether both copies' word embeddings get sparse gradients and ``RowSparseRMSprop`` updates them.

        Why: a CT batch holds a few hundred of the 30k tokens, and a dense gradient plus a dense RMSprop
        update of both embedding matrices were ~60% of a step (``lightning_modules/row_sparse_rmsprop.py``);
        the updates are RMSprop's own. Only where a sparse gradient is safe: one process (DDP's gradient
        all-reduce is dense on NCCL) no gradient clipping (``clip_grad_norm_`` rejects sparse tensors) and no weight decay;
        elsewhere the dense path trains the same algorithm. And only on the CPU: on a GPU the dense update is one
        fast kernel and the sparse path cost more than it saved (H200, batch 32: 53.0 vs 45.6 ms a step, backward
        24.6 vs 14.8 ms; docs/speed.md "On a GPU"). Lightning moves the module to its device before it builds the
        optimizer, so ``self.device`` is the training device here.
        """
        if self.hparams.weight_decay:
            return False  # decay moves every row every step: nothing to skip
        if self.device.type != "cpu":
            return False
        trainer = self._trainer
        if trainer is None:
            return True
        return trainer.world_size == 1 and isinstance(trainer.strategy, SingleDeviceStrategy) \
            and not trainer.gradient_clip_val

    def _schedule_options(self) -> dict:
        """The reference's ``step`` schedule: ``lr_drops`` equal drops to ``final_lr``, one every ``lr_step_every``."""
        hp = self.hparams
        return {"final_lr": hp.final_lr, "step_every": hp.lr_step_every, "drops": hp.lr_drops}

    # ---------------------------------------------------------------------------------- selection
    def _sts_callback(self) -> STSEvaluator | None:
        found = [c for c in self.trainer.callbacks if isinstance(c, STSEvaluator)]
        return found[0] if found else None

    def on_fit_start(self) -> None:
        cb = self._sts_callback()
        if cb is not None and self.hparams.select_task not in cb.task_names:
            raise ConfigError(f"model.select_task={self.hparams.select_task!r} is not among the STS callback's "
                              f"tasks {cb.task_names}: CT could not pick the better copy")

    def on_validation_epoch_start(self) -> None:
        """Score both copies, keep the better one, log ``val/model{1,2}_<task>_spearman`` and ``val/ct_selected``.

        Why at the START of validation: Lightning runs callbacks' ``on_validation_epoch_end`` before the
        module's, and the weights do not change during validation; selecting here makes the STS callback's
        ``val/<task>_spearman`` (monitored by ModelCheckpoint) the kept copy's score. The cost is one extra
        evaluation of the kept copy. Uses the callback's collective ``evaluate``,
        which every rank calls here in the same order and which returns identical metrics on every rank,
        so under DDP all ranks select the same copy with no further communication.
        """
        trainer = self.trainer
        cb = self._sts_callback()
        if cb is None or trainer.sanity_checking:
            return
        if trainer.state.fn == "fit" and (trainer.current_epoch + 1) % cb.every_n_epochs != 0:
            return  # the callback will not evaluate this time either
        key = f"val/{self.hparams.select_task}_spearman"
        scores = {}
        for copy in (1, 2):
            with self._forced_copy(copy):
                metrics = cb.evaluate(trainer, self)
            scores[copy] = metrics[key]
            for name, value in metrics.items():
                if name.endswith("_spearman") and name != "val/sts_avg_spearman":
                    self.log(name.replace("val/", f"val/model{copy}_", 1), value, rank_zero_only=False,
                             sync_dist=False)
        best = 2 if scores[2] > scores[1] else 1  # ties (and NaN) keep model 1
        self.selected_copy.fill_(best)
        self.log("val/ct_selected", float(best), rank_zero_only=False, sync_dist=False)

    @contextlib.contextmanager
    def _forced_copy(self, copy: int) -> Iterator[None]:
        self._eval_copy = copy
        try:
            yield
        finally:
            self._eval_copy = None

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
