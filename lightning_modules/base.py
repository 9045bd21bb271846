"""``EncoderModule``: what every trained encoder method shares (encoder, tokenizing, embedding, scorer, optimizer).

One base class keeps each method file to its objective. The encoder is built from plain scalars, so
``save_hyperparameters()`` makes a checkpoint self-contained (``torch.load(path, weights_only=True)``). The model is
registered once, as ``self.encoder_model``; ``self.encoder`` is an ``HFEncoder`` view on it, so ``embed``,
``scorer`` and ``export`` always see the current weights.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import ClassVar

import torch
from lightning.pytorch import LightningModule
from torch import Tensor

from sts_lightning.embeddings.encoders.hf import HFEncoder
from sts_lightning.embeddings.errors import ConfigError, DivergedError, unknown_choice
from sts_lightning.embeddings.methods.declaration import MATRYOSHKA_REFUSED
from sts_lightning.embeddings.methods.pooling import PoolingScorer, get_pooling
from sts_lightning.embeddings.methods.shared.batch_tokens import (
    BatchTokenizer,
    TextTokenizer,
    batch_token_ids,
)
from sts_lightning.embeddings.methods.shared.matryoshka import check_matryoshka_fits, matryoshka_loss
from sts_lightning.embeddings.scoring.scorer import Scorer
from sts_lightning.lightning_modules.activation_checkpointing import enable_gradient_checkpointing
from sts_lightning.lightning_modules.arg_rules import check_args
from sts_lightning.lightning_modules.export_files import EncoderExport
from sts_lightning.lightning_modules.grad_cache import CachedLoss, uncached
from sts_lightning.lightning_modules.length_buckets import embed_length_buckets
from sts_lightning.lightning_modules.matryoshka import matryoshka_prefixes
from sts_lightning.lightning_modules.optimizers import build_optimizer, known_steps, lr_schedule

log = logging.getLogger(__name__)

OPTIMIZERS = ("adamw", "rmsprop")
SCHEDULERS = ("linear", "constant")


def check_finite(loss: Tensor, step: int) -> None:
    """Stop at the first non-finite loss, naming the step: one NaN poisons every weight through AdamW."""
    if not torch.isfinite(loss.detach()).all():
        raise DivergedError(
            f"training loss is {loss.detach().float().item()} at global step {step}: stopping. "
            "Lower the learning rate, use bf16/fp32 precision, or enable gradient clipping."
        )


class EncoderModule(EncoderExport, LightningModule):
    """A LightningModule around one Hugging Face encoder with a pooled-vector scorer.

    Subclasses add their heads and ``training_step`` and take these arguments as ``**base``, naming one only where
    their recipe's default differs, so each default is written once. ``weight_decay`` skips biases and LayerNorm
    weights; ``max_length=None`` takes the model's sentence-transformers setting.
    """

    def __init__(self, model_name_or_path: str, pooling: str = "mean",
                 max_length: int | None = None, lr: float = 2e-5, weight_decay: float = 0.01,
                 warmup_ratio: float = 0.1, optimizer: str = "adamw", scheduler: str = "linear",
                 eval_batch_size: int = 64, mini_batch_size: int | None = None,
                 gradient_checkpointing: bool = False, matryoshka_dims: Sequence[int] | None = None,
                 matryoshka_weights: Sequence[float] | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()
        check_args({"lr": lr, "weight_decay": weight_decay, "warmup_ratio": warmup_ratio, "max_length": max_length,
                    "eval_batch_size": eval_batch_size, "mini_batch_size": mini_batch_size})
        if mini_batch_size is not None and not isinstance(self, CachedLoss):
            raise uncached(type(self).__name__, mini_batch_size)
        self.matryoshka = matryoshka_prefixes(self, matryoshka_dims, matryoshka_weights, str(model_name_or_path))
        get_pooling(pooling)  # fail now, not after the first epoch
        if optimizer not in OPTIMIZERS:
            raise unknown_choice("optimizer", optimizer, OPTIMIZERS)
        if scheduler not in self.schedulers:
            raise unknown_choice("scheduler", scheduler, self.schedulers)
        self.encoder = self.load_encoder(str(model_name_or_path), max_length, eval_batch_size)
        self.encoder_model = self.encoder.model  # the one registered copy of the weights
        if self.matryoshka:
            check_matryoshka_fits(self.matryoshka[0], self.embedding_dim)
        self.encoder_model.train()  # HFEncoder loads for inference; Lightning no longer forces train mode
        if getattr(self.encoder_model, "pooler", None) is not None:
            # BERT's pooler feeds no pooling of ours (nor sentence-transformers'): frozen, it gets no
            # None gradients, so DDP needs no unused-parameter search; export keeps its weights as loaded.
            self.encoder_model.pooler.requires_grad_(False)
        if gradient_checkpointing:
            enable_gradient_checkpointing(self.encoder_model)
        self.pool = get_pooling(pooling)

    # Whether the method's loss goes through ``with_matryoshka``, i.e. ``matryoshka_dims`` applies; else why not (a
    # literal: runs/ reads both from the source, before torch loads, and refuses with the same line).
    matryoshka_ok: ClassVar[bool] = False
    matryoshka_refused: ClassVar[str] = MATRYOSHKA_REFUSED  # a method's declaration may give its own
    # ``(option, value, fix)`` of a head the loss reads and the export drops: Matryoshka refused with it.
    training_only_head: ClassVar[tuple[str, str, str] | None] = None
    # The ``scheduler`` values this method accepts (``lightning_modules.optimizers.SCHEDULES``).
    schedulers: ClassVar[tuple[str, ...]] = SCHEDULERS
    # Training forward passes on a CPU split a batch into this many length-sorted groups (``forward_groups``).
    length_buckets: int = 2
    # The batch keys whose text the method embeds: tokenized in the DataLoader's workers (``batch_tokenizer``).
    text_fields: ClassVar[tuple[str, ...]] = ()

    def load_encoder(self, model_name_or_path: str, max_length: int | None, batch_size: int) -> HFEncoder:
        """The encoder this module trains (a masked LM's method returns a view on the LM's encoder)."""
        return HFEncoder.from_pretrained(model_name_or_path, max_length=max_length, batch_size=batch_size)

    @property
    def embedding_dim(self) -> int:
        return self.encoder.hidden_size

    def _live_encoder(self) -> HFEncoder:
        """The HFEncoder view, with inputs sent to wherever Lightning moved the model."""
        self.encoder.device = self.device
        return self.encoder

    # ------------------------------------------------------------------------------ token ids, embedding
    def batch_tokenizer(self) -> BatchTokenizer | None:
        """The token ids of ``text_fields`` the loader's workers add (only the tokenizer travels, not the model)."""
        if not self.text_fields:
            return None
        return BatchTokenizer(self.text_fields, TextTokenizer(self.encoder.tokenizer, self.encoder.max_length))

    def tokenize(self, sentences: Sequence[str]) -> list[list[int]]:
        """Token ids as the encoder makes them (for text that no worker tokenized)."""
        return self._live_encoder().tokenize(sentences)

    def batch_ids(self, batch: dict, field: str) -> list[list[int]]:
        """The token ids of ``batch[field]``: made by the loader's workers, or here for a hand-built batch."""
        return batch_token_ids(batch, field, self.tokenize)

    def forward_groups(self) -> int:
        """Length-sorted forward passes per embedded list: ``length_buckets`` on a CPU (arithmetic-bound, so padding
        saved is time saved), one on a GPU (launch-bound: each group is another set of kernels)."""
        return self.length_buckets if self.device.type == "cpu" else 1

    def embed_ids(self, ids: Sequence[Sequence[int]]) -> Tensor:
        """Pooled ``(batch, dim)`` vectors WITH gradients of tokenized sentences (training)."""
        return embed_length_buckets(self._live_encoder(), self.pool, ids, self.forward_groups())

    def embed(self, sentences: Sequence[str]) -> Tensor:
        """Pooled ``(batch, dim)`` vectors WITH gradients (training); ``scorer()`` is for inference."""
        return self.embed_ids(self.tokenize(sentences))

    def with_matryoshka(self, loss_fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
        """``loss_fn`` of embeddings, summed over the ``matryoshka_dims`` prefixes when set (else itself)."""
        return loss_fn if self.matryoshka is None else matryoshka_loss(loss_fn, *self.matryoshka)

    def scorer(self) -> Scorer:
        """Cosine over pooled vectors of the live model (the STS callback switches eval mode)."""
        return self.probe_scorer(self.hparams.pooling)

    def probe_scorer(self, pooling: str) -> Scorer:
        """Another pooling of the live encoder (the STS callback's ``probe_poolings``), scored beside its own."""
        return PoolingScorer(self._live_encoder(), pooling, batch_size=self.hparams.eval_batch_size)

    def validation_step(self, batch, batch_idx: int) -> None:
        """Nothing per batch: the STS callback scores ``scorer()`` once at the end of the loop."""
        return None

    def on_before_backward(self, loss: Tensor) -> None:
        check_finite(loss, self.global_step)

    # ------------------------------------------------------------------------------ optimization
    def _param_groups(self) -> list[dict]:
        decay, no_decay = [], []
        for _, param in self.named_parameters():
            if param.requires_grad:
                (decay if param.ndim >= 2 else no_decay).append(param)  # biases, LayerNorm: 1-D
        return [{"params": decay, "weight_decay": self.hparams.weight_decay},
                {"params": no_decay, "weight_decay": 0.0}]

    def _rmsprop(self, groups: list[dict]) -> torch.optim.Optimizer:
        """``optimizer=rmsprop`` (torch's defaults but ``lr``); a method may change its settings or kind."""
        return build_optimizer("rmsprop", groups, lr=self.hparams.lr)

    def _schedule_options(self) -> dict:
        """Extra arguments of ``lr_schedule`` for a method's own schedule kind; none here."""
        return {}

    def configure_optimizers(self):
        """``build_optimizer`` over ``_param_groups`` and ``lr_schedule``: the same two factories for every method."""
        hp = self.hparams
        groups = self._param_groups()
        optimizer = self._rmsprop(groups) if hp.optimizer == "rmsprop" else build_optimizer(hp.optimizer, groups, hp.lr)
        total = 0
        if hp.scheduler in ("linear", "constant"):  # the others need no step count (and no trainer)
            total = known_steps(self.trainer)
            if total == 0 and hp.scheduler == "linear":
                raise ConfigError("scheduler=linear needs a known number of steps: set trainer.max_steps "
                                  "(the data stream has no length) or use scheduler=constant")
        schedule = lr_schedule(optimizer, hp.scheduler, hp.lr, total, hp.warmup_ratio, **self._schedule_options())
        log.info("optimizer %s lr=%g, %s schedule over %d steps (warm-up ratio %g)", hp.optimizer, hp.lr,
                 hp.scheduler, total, hp.warmup_ratio)
        return {"optimizer": optimizer, "lr_scheduler": schedule}
