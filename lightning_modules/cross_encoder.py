"""The cross-encoder: one transformer reads ``[CLS] a [SEP] b [SEP]`` and a head scores the pair.

Why it belongs beside the bi-encoders: attention across the two sentences makes it the strongest supervised STS
model (SBERT, Table 2) and the teacher AugSBERT distils; it embeds no sentence, so it is a pair scorer
(``embeddings.scoring.scorer.PairScorer``) everywhere: the STS callback shards its pairs across ranks,
``evaluate.py`` scores it with the ``cross_encoder`` scorer and its export is a ``CrossEncoder`` directory.

Recipe: the cross-encoder of sentence-transformers' AugSBERT example (``train_sts_indomain_semantic.py``: 16
sequences a step over both orders of each pair, AdamW lr 2e-5, 10% linear warm-up, one epoch, BCE-with-logits on the
gold score in [0, 1]; ``training_stsbenchmark.py`` trains 4); the network is the backbone's Hugging Face
``...ForSequenceClassification``, exactly what ``CrossEncoder(path)`` rebuilds from the export. Default backbone
all-MiniLM-L6-v2: the packaged paraphrase-MiniLM-L3-v2 has no pooler (its ONNX conversion dropped it) and reached
STS-B dev 21.3 where L6 reached 80.7 (360 steps of 8 pairs, lr 2e-5; docs/results/cross_encoders.md).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.io.export_note import CROSS_ENCODER, EXPORT, LoadingNote, evaluate_command
from sts_lightning.embeddings.methods.cross_encoder import METHOD
from sts_lightning.embeddings.methods.cross_encoder.objective import OBJECTIVES, labels_of, pair_loss
from sts_lightning.embeddings.methods.cross_encoder.pair_model import (
    pair_classifier,
    pair_logits,
    write_cross_encoder_files,
)
from sts_lightning.embeddings.methods.cross_encoder.scorer import CrossEncoderPairScorer
from sts_lightning.lightning_modules.base import EncoderModule


class CrossEncoderModule(EncoderModule):
    """A cross-encoder on scored pairs (``objective`` ``bce`` / ``mse``) or NLI pairs (``nli``, 3 labels);
    ``symmetric``: each scored pair trained in both orders in its step (the AugSBERT example's cross-encoder trains
    on both; NLI is directional, never swapped); ``pooling`` is not an option (the architecture's head reads the pair), fixed to ``cls`` for the base class."""

    method_info = METHOD.card()

    def __init__(self, model_name_or_path: str = "all-MiniLM-L6-v2", *, objective: str = "bce",
                 symmetric: bool = True, pooling: str | None = None, **base) -> None:
        if objective not in OBJECTIVES:
            raise unknown_choice("model.objective", objective, OBJECTIVES)
        if pooling not in (None, "cls"):
            raise ConfigError(f"model.pooling={pooling}: a cross-encoder pools nothing (its architecture's "
                              "classification head reads the pair); leave pooling unset")
        pooling = "cls"  # the hyper-parameters (read from this frame by save_hyperparameters) hold what the base used
        super().__init__(model_name_or_path, pooling=pooling, **base)
        self.pair_model = pair_classifier(self.encoder_model, labels_of(objective))
        # One registered copy of the weights: the encoder lives inside pair_model (checkpoints hold it once).
        del self.encoder_model
        self.__dict__["encoder_model"] = self.pair_model.base_model
        self.pair_model.train()
        # CrossEncoder(export) truncates at the tokenizer's model_max_length: the export's tokenizer says ours
        self.encoder.tokenizer.model_max_length = self.encoder.max_length

    # ------------------------------------------------------------------------------ training
    def pair_logits(self, sentences1: list[str], sentences2: list[str]) -> Tensor:
        """``(n, labels)`` logits WITH gradients (training); ``scorer()`` is for inference."""
        self._live_encoder()
        return pair_logits(self.pair_model, self.encoder.tokenizer, sentences1, sentences2, self.encoder.max_length)

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        nli = self.hparams.objective == "nli"
        key = "labels" if nli else "scores"
        if key not in batch:
            raise ConfigError(f"model=cross_encoder objective={self.hparams.objective} needs batches with {key!r} "
                              f"({'data=nli' if nli else 'data=scored_pairs'}), got batch keys {sorted(batch)}")
        first, second, targets = list(batch["sentences1"]), list(batch["sentences2"]), batch[key]
        if self.hparams.symmetric and not nli:  # (a, b) and (b, a): a similarity does not depend on the order
            first, second, targets = first + second, second + first, torch.cat([targets, targets])
        logits = self.pair_logits(first, second)
        loss = pair_loss(self.hparams.objective, logits, targets.to(logits.device))
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch[key]))
        return loss

    # ------------------------------------------------------------------------------ scoring
    def scorer(self) -> CrossEncoderPairScorer:
        """The live model's pair scores (sigmoid of the logit; NLI: P(entailment)), as its export predicts them."""
        self._live_encoder()
        return CrossEncoderPairScorer(self.pair_model, self.encoder.tokenizer, self.encoder.max_length,
                                      self.hparams.eval_batch_size)

    def probe_scorer(self, pooling: str):
        raise ConfigError("callbacks.sts_evaluation.probe_poolings: a cross-encoder has no sentence vector to pool")

    # ------------------------------------------------------------------------------ export
    def export_model(self) -> torch.nn.Module:
        return self.pair_model

    def write_export_files(self, folder: Path) -> str | None:
        """sentence-transformers' ``CrossEncoder`` files (the tokenizer, saved by ``export``, truncates where ours did)."""
        write_cross_encoder_files(folder, labels_of(self.hparams.objective))
        return (f'a cross-encoder: `{CROSS_ENCODER}.predict([(a, b), ...])` gives exactly the scores that were '
                "evaluated" + ("" if self.hparams.objective != "nli" else " as P(entailment) after a softmax "
                               "(predict returns the three logits)"))

    def loading_note(self, why_not: str | None) -> LoadingNote:
        what = (f"{type(self).__name__}: a Hugging Face sequence-classification model "
                "(`AutoModelForSequenceClassification`) over `[CLS] a [SEP] b [SEP]`; a pair's score is "
                + ("the probability of entailment (softmax over 3 NLI logits)." if self.hparams.objective == "nli"
                   else "the sigmoid of its logit."))
        return LoadingNote(what, evaluate_command(["none"], f"{{name:cross_encoder,path:{EXPORT}}}"), why_not)
