"""Masked-language-model pretraining (Devlin et al. 2019): a raw backbone, or domain adaptation of an encoder.

``encoder_model`` is the encoder INSIDE the masked LM (same live weights), so the STS callback scores the encoder as
it trains and the export has the base's sentence-transformers files. Masks are seeded by (``mask_seed``, step, rank,
micro-batch): a resume draws the same ones. Held-out sentences are scored with fixed masks, summed over the ranks.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import torch
from torch import Tensor
from torchmetrics import MeanMetric

from sts_lightning.embeddings.encoders.hf import HFEncoder
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.model_card import DataFacts, TrainingFacts
from sts_lightning.embeddings.methods.mlm import METHOD
from sts_lightning.embeddings.methods.mlm.masked_lm import (
    load_masked_lm,
    mlm_head,
    scratch_label,
    scratch_masked_lm,
    scratch_spec,
)
from sts_lightning.embeddings.methods.mlm.objective import (
    HELDOUT_STREAM,
    TRAIN_STREAM,
    Rows,
    build_rows,
    mask_generator,
    mask_rows,
    masked_lm_loss,
    masker,
)
from sts_lightning.embeddings.methods.shared.batch_tokens import (
    BatchTokenizer,
    TextTokenizer,
    batch_token_ids,
)
from sts_lightning.lightning_modules.arg_rules import POSITIVE_INT, check_args, check_value
from sts_lightning.lightning_modules.base import EncoderModule
from sts_lightning.lightning_modules.metrics import accuracy

log = logging.getLogger(__name__)


class MLMModule(EncoderModule):
    """BERT's masked-LM pretraining on plain sentences (``data=sentences``).

    ``from_scratch`` (``true`` or ``{layers, hidden, heads, intermediate, max_positions, seed}``): a seeded random
    BERT over the bert-base-uncased vocabulary instead of ``model_name_or_path``. ``lr`` 5e-4 is ELECTRA's (Clark et
    al. 2020) for small models from scratch; continued pretraining wants a gentler ``model.lr=5e-5``.
    """

    method_info = METHOD.card()

    def __init__(self, model_name_or_path: str = "bert-random-4x256", *, from_scratch: dict | bool | None = None,
                 mlm_probability: float = 0.15, whole_word_mask: bool = False, pack: bool = True, mask_seed: int = 0,
                 max_length: int | None = 128, lr: float = 5e-4, **base) -> None:
        from_scratch = scratch_spec(from_scratch)  # a plain dict before save_hyperparameters records it
        check_args({"mlm_probability": mlm_probability})
        check_value("model.max_length", max_length, POSITIVE_INT)  # rows need a length
        check_value("model.mask_seed", mask_seed, POSITIVE_INT._replace(low=0))
        super().__init__(model_name_or_path, max_length=max_length, lr=lr, **base)
        self.mlm_head = mlm_head(self.masked_lm)
        self.masked_lm.train()  # from_pretrained hands the head over in eval mode
        self.collator = masker(self.encoder.tokenizer, mlm_probability, whole_word_mask)
        vocab = int(self.masked_lm.config.vocab_size)
        self.train_accuracy = accuracy(vocab, sync_on_step=True)
        self.val_accuracy, self.val_loss = accuracy(vocab), MeanMetric()
        self.tokens_seen = 0
        self.heldout_metrics: dict[str, float] = {}

    def load_encoder(self, model_name_or_path: str, max_length: int | None, batch_size: int) -> HFEncoder:
        """The masked LM and an ``HFEncoder`` on its encoder; the LM stays out of the registry (its parts are
        ``encoder_model`` and ``mlm_head``), so every weight is in the state dict once."""
        spec = self.hparams.from_scratch
        model, tokenizer = scratch_masked_lm(spec) if spec else load_masked_lm(model_name_or_path)
        self.__dict__["masked_lm"] = model
        return HFEncoder(model.base_model, tokenizer, max_length=max_length, batch_size=batch_size,
                         name="mlm-scratch" if spec else model_name_or_path)

    def export_model(self) -> torch.nn.Module:
        """The whole masked LM: ``AutoModel`` loads its encoder, ``AutoModelForMaskedLM`` encoder and head."""
        return self.masked_lm

    def base_models(self) -> tuple[str, ...]:
        spec = self.hparams.from_scratch
        return (scratch_label(spec),) if spec else super().base_models()

    # ------------------------------------------------------------------------------------ rows, loss
    text_fields = ("sentences",)  # tokenized in the DataLoader's workers (with piece offsets for whole words)

    def text_tokenizer(self) -> TextTokenizer:
        """Ids (and, for whole-word masking, each piece's character span) per sentence."""
        return TextTokenizer(self.encoder.tokenizer, self.hparams.max_length, offsets=self.hparams.whole_word_mask)

    def batch_tokenizer(self) -> BatchTokenizer:
        return BatchTokenizer(self.text_fields, self.text_tokenizer())

    def rows(self, sentences: list[str]) -> Rows:
        return self.rows_of(self.text_tokenizer()(sentences))

    def rows_of(self, tokens) -> Rows:
        """Rows of ``text_tokenizer``'s output (ids, or ids and offsets)."""
        tokenizer, hp = self.encoder.tokenizer, self.hparams
        ids, offsets = tokens if hp.whole_word_mask else (tokens, None)
        return build_rows(ids, tokenizer.all_special_ids, tokenizer.pad_token_id or 0, hp.max_length, hp.pack, offsets)

    def masked_loss(self, rows: Rows, generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
        """(loss, predicted ids, true ids) of the masked positions of ``rows``."""
        input_ids, labels = mask_rows(self.collator, rows, generator)
        out = self.encoder_model(input_ids=input_ids.to(self.device),
                                 attention_mask=rows.attention_mask.to(self.device))
        return masked_lm_loss(out.last_hidden_state, labels.to(self.device), self.mlm_head)

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        if "sentences" not in batch:
            raise ConfigError("model=mlm needs plain sentences (data=sentences); got batches with keys "
                              f"{sorted(batch)}")
        rows = self.rows_of(batch_token_ids(batch, "sentences", self.text_tokenizer()))
        trainer = self._trainer  # None when a benchmark calls the step by hand
        micro = batch_idx % max(int(trainer.accumulate_grad_batches), 1) if trainer is not None else 0
        loss, preds, targets = self.masked_loss(
            rows, mask_generator(self.hparams.mask_seed, TRAIN_STREAM, self.global_step, self.global_rank, micro))
        self.train_accuracy(preds, targets)
        n = max(len(targets), 1)
        self.log("train/loss", loss, prog_bar=True, batch_size=n)
        self.log("train/mlm_loss", loss, batch_size=n)
        self.log("train/mlm_accuracy", self.train_accuracy, on_step=True, on_epoch=False, batch_size=n)
        tokens = torch.tensor(rows.tokens, device=self.device)
        if trainer is not None:
            tokens = trainer.strategy.reduce(tokens, reduce_op="sum")  # every rank's tokens
        self.tokens_seen += int(tokens)
        return loss

    # ------------------------------------------------------------------------------------ held-out
    def on_validation_epoch_start(self) -> None:
        if self.trainer.sanity_checking:
            return
        sentences = getattr(self.trainer.datamodule, "heldout", lambda: [])()
        if not sentences:
            log.info("no held-out sentences (data.heldout_sentences=0): val/mlm_loss and val/mlm_accuracy not logged")
            return
        self.heldout_metrics = self.score_heldout(sentences)
        for key, value in self.heldout_metrics.items():
            self.log(key, value, rank_zero_only=False, sync_dist=False)

    @torch.no_grad()
    def score_heldout(self, sentences: list[str]) -> dict[str, float]:
        """Loss and accuracy over all ``sentences`` (fixed masks), every rank scoring its share of the batches."""
        size, rank = self.hparams.eval_batch_size, self.global_rank
        world = self._trainer.world_size if self._trainer is not None else 1
        for b, start in enumerate(range(0, len(sentences), size)):
            if b % world == rank:
                rows = self.rows(sentences[start:start + size])
                loss, preds, targets = self.masked_loss(rows, mask_generator(self.hparams.mask_seed, HELDOUT_STREAM, b))
                if len(targets):
                    self.val_loss.update(loss, weight=len(targets))
                    self.val_accuracy.update(preds, targets)
        metrics = {"val/mlm_loss": float(self.val_loss.compute()),
                   "val/mlm_accuracy": float(self.val_accuracy.compute())}
        self.val_loss.reset()
        self.val_accuracy.reset()
        return metrics

    # ------------------------------------------------------------------------------------ state, card
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["mlm"] = {"tokens_seen": int(self.tokens_seen), "heldout": dict(self.heldout_metrics)}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint.get("mlm", {})
        self.tokens_seen = int(state.get("tokens_seen", 0))
        self.heldout_metrics = {k: float(v) for k, v in state.get("heldout", {}).items()}

    def card_notes(self) -> tuple[str, ...]:
        """What only MLM knows: tokens seen and the final held-out loss / accuracy."""
        notes = [f"tokens seen (MLM, all ranks, padding excluded): {self.tokens_seen}"]
        if self.heldout_metrics:
            notes.append(f"final held-out MLM loss {self.heldout_metrics['val/mlm_loss']:.4f}, accuracy "
                         f"{self.heldout_metrics['val/mlm_accuracy']:.4f} (masked positions, fixed masks)")
        else:
            notes.append("held-out MLM loss / accuracy: not measured (no held-out sentences)")
        return tuple(notes)

    def export(self, path, training: TrainingFacts | None = None):
        if training is not None:
            data = training.data or DataFacts()
            training = replace(training, data=replace(data, notes=(*data.notes, *self.card_notes())))
        return super().export(path, training)
