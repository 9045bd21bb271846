"""DiffCSE (Chuang et al., NAACL 2022): SimCSE plus conditional replaced-token detection (RTD).

Each step (voidism/DiffCSE, ``cl_forward``): SimCSE's two dropout views through the training MLP (the authors'
``ProjectionMLP`` with BatchNorm) -> InfoNCE; each view's tokens masked (``masking_ratio``, seeded by ``mask_seed``,
step, rank and micro-batch, so a resume draws the same masks) and filled in by a frozen masked LM (the generator);
a discriminator (a copy of the starting encoder) conditioned on the row's MLP output predicts which tokens were
replaced. Loss = InfoNCE + ``lambda_weight`` x RTD: the sentence vector must say what the edit changed.

Evaluation and export: [CLS] without the MLP, as SimCSE's. The generator has no gradients, follows the module's
mode and is part of checkpoints. Recipe defaults: ``run_diffcse.sh``, with a packaged generator so they run offline.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from torch import Tensor

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.diffcse import METHOD
from sts_lightning.embeddings.methods.diffcse.generator_check import generator_problem
from sts_lightning.embeddings.methods.diffcse.nets import (
    ConditionalDiscriminator,
    load_generator,
    other_vocabulary,
    packaged_vocabulary,
    projection_mlp,
    same_vocabulary,
)
from sts_lightning.embeddings.methods.diffcse.objective import diffcse_loss, edit_tokens, rtd_accuracy
from sts_lightning.embeddings.methods.mlm.objective import (
    TRAIN_STREAM,
    Rows,
    build_rows,
    mask_generator,
    mask_rows,
    masker,
)
from sts_lightning.lightning_modules.arg_rules import POSITIVE_INT, check_args, check_value
from sts_lightning.lightning_modules.grad_cache import uncached
from sts_lightning.lightning_modules.simcse import SimCSEModule

log = logging.getLogger(__name__)


class DiffCSEModule(SimCSEModule):
    """DiffCSE on plain sentences (``data=sentences``).

    ``generator`` is the frozen masked LM that edits the sentences and must share the encoder's vocabulary;
    ``lambda_weight`` weighs RTD (the paper's 0.005 for BERT, 0.05 for RoBERTa).
    """

    # model.matryoshka_dims (SimCSE's, mlp=none): InfoNCE on each prefix, RTD once on the full vector (diffcse_loss)
    method_info = METHOD.card()

    def __init__(self, model_name_or_path: str = "paraphrase-MiniLM-L3-v2", *,
                 generator: str = "paraphrase-MiniLM-L3-v2-mlm", lambda_weight: float = 0.005, masking_ratio: float = 0.3,
                 batchnorm: bool = True, mask_seed: int = 0, lr: float = 7e-6, **base) -> None:
        check_args({"lambda_weight": lambda_weight, "masking_ratio": masking_ratio})
        check_value("model.mask_seed", mask_seed, POSITIVE_INT._replace(low=0))
        if base.get("objective", "unsupervised") != "unsupervised":
            raise ConfigError(f"model.objective={base['objective']!r}: DiffCSE is unsupervised (data=sentences); "
                              "supervised SimCSE is model=simcse_sup")
        if batchnorm and base.get("mlp", "train") == "always":
            raise ConfigError("model.mlp=always needs model.batchnorm=false: the BatchNorm MLP is a training device "
                              "(the authors' --mlp_only_train) and has no sentence-transformers form")
        if base.get("mini_batch_size") is not None:  # the RTD term needs the live vectors in its graph: no GradCache
            check_args({"mini_batch_size": base["mini_batch_size"]})
            raise uncached(type(self).__name__, base["mini_batch_size"])
        problem = generator_problem("model.generator", generator)
        if problem:
            raise ConfigError(problem)
        super().__init__(model_name_or_path, lr=lr, **base)
        self.method_info = METHOD.card()
        if batchnorm and self.mlp is not None:
            self.mlp = projection_mlp(self.embedding_dim, float(getattr(self.encoder_model.config, "initializer_range",
                                                                         0.02)))
        tokenizer = self.encoder.tokenizer
        known = packaged_vocabulary(generator)  # before a packaged generator's build (minutes), not after it
        if known is not None and not same_vocabulary(known, tokenizer.get_vocab()):
            raise ConfigError(other_vocabulary(generator, model_name_or_path, len(known), len(tokenizer)))
        self.generator, generator_tokenizer = load_generator(generator)
        self.generator.train(self.training)  # from_pretrained hands it over in eval mode; it follows the module's
        if not same_vocabulary(generator_tokenizer.get_vocab(), tokenizer.get_vocab()):
            raise ConfigError(other_vocabulary(generator, model_name_or_path, len(generator_tokenizer), len(tokenizer)))
        self.discriminator = ConditionalDiscriminator(self.encoder_model)
        self.collator = masker(tokenizer, masking_ratio)

    # ------------------------------------------------------------------------------------ training
    def rows(self, ids: Sequence[Sequence[int]]) -> Rows:
        """The views' token ids as padded rows (one sentence a row, padded to the longest, as both passes see it)."""
        tokenizer = self.encoder.tokenizer
        return build_rows(ids, tokenizer.all_special_ids, tokenizer.pad_token_id or 0, self.encoder.max_length,
                          pack=False)

    def mask_seed_generator(self, batch_idx: int) -> torch.Generator:
        trainer = self._trainer  # None when a test or benchmark calls the step by hand
        micro = batch_idx % max(int(trainer.accumulate_grad_batches), 1) if trainer is not None else 0
        return mask_generator(self.hparams.mask_seed, TRAIN_STREAM, self.global_step, self.global_rank, micro)

    def diffcse_losses(self, ids: Sequence[Sequence[int]], masked: Tensor) -> dict[str, Tensor]:
        """The losses and RTD diagnostics of the views ``ids`` (``[s; s]``), ``masked`` as the generator reads them."""
        rows = self.rows(ids)
        emb = self.embed_ids(ids)  # (2B, hidden), through the training MLP
        mask = rows.attention_mask.to(self.device)
        original = rows.input_ids.to(self.device)
        with torch.no_grad():
            predicted = self.generator(input_ids=masked.to(self.device), attention_mask=mask).logits.argmax(-1)
        edited, replaced = edit_tokens(predicted, original, mask, int(self.encoder.tokenizer.cls_token_id))
        logits = self.discriminator(edited, mask, emb)
        view1, view2 = emb.chunk(2, dim=0)
        total, contrastive, detection = diffcse_loss(view1, view2, logits, replaced, self.hparams.temperature,
                                                     self.hparams.lambda_weight, matryoshka=self.matryoshka)
        return {"loss": total, "contrastive_loss": contrastive, "rtd_loss": detection,
                "rtd_accuracy": rtd_accuracy(logits, replaced, mask),
                "replaced": replaced.sum().float() / mask.sum().clamp(min=1).float()}

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        if not self.encoder_model.training:  # dropout is SimCSE's noise; the generator's mode follows (see above)
            self.train()
        ids = self.training_ids(batch)
        masked, _ = mask_rows(self.collator, self.rows(ids), self.mask_seed_generator(batch_idx))
        out = self.diffcse_losses(ids, masked)
        n = len(ids) // 2
        self.log("train/loss", out["loss"], prog_bar=True, batch_size=n)
        for key in ("contrastive_loss", "rtd_loss", "rtd_accuracy", "replaced"):
            self.log(f"train/{key}", out[key].detach(), batch_size=n)
        return out["loss"]
