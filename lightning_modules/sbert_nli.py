"""SBERT trained on NLI (Reimers & Gurevych, EMNLP 2019): siamese encoder + softmax classifier.

Both sentences are mean-pooled to ``u`` and ``v`` by one encoder, and a linear layer over ``(u, v, |u - v|)``
predicts the NLI label; the classifier is then thrown away and the pooled vector is the embedding (paper recipe,
Sec. 4). ``objective="mnrl"`` is SBERT's later NLI recipe (``training_nli_v2.py``): MultipleNegativesRankingLoss
over triplets, cosine x ``scale`` against every candidate of the global batch. Why offer it: ranking by cosine
shapes the embedding space directly, which lets a randomly initialised encoder learn STS from the local NLI pairs
(docs/dev/scratch-learning-signal.md); ``mini_batch_size`` caches it (sentence-transformers' cached MNRL).
"""

from __future__ import annotations

from torch import Tensor, nn

from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.methods.sbert_nli import METHOD
from sts_lightning.embeddings.methods.sbert_nli.objective import sbert_nli_loss, sbert_softmax_logits_input
from sts_lightning.embeddings.methods.shared.in_batch import multiple_negatives_ranking_loss
from sts_lightning.lightning_modules.base import EncoderModule
from sts_lightning.lightning_modules.grad_cache import CachedLoss
from sts_lightning.lightning_modules.metrics import accuracy

OBJECTIVES = ("softmax", "mnrl")
BATCH_KEYS = {"softmax": "sentences1", "mnrl": "anchors"}
FORMAT_OF = {"softmax": "pairs", "mnrl": "triplets"}


class SBERTNLIModule(EncoderModule, CachedLoss):
    """SBERT's classification objective on NLI pairs (batches from ``datamodules.nli``).

    ``num_labels`` applies to ``softmax`` only, ``scale`` and ``mini_batch_size`` to ``mnrl`` only.
    """

    method_info = METHOD.card()
    matryoshka_ok = METHOD.matryoshka_ok
    text_fields = ("sentences1", "sentences2", "anchors", "positives", "negatives")  # tokenized in the loader's workers

    def __init__(self, model_name_or_path: str = "all-MiniLM-L6-v2", *, num_labels: int = 3,
                 objective: str = "softmax", scale: float = 20.0, **base) -> None:
        if objective not in OBJECTIVES:
            raise unknown_choice("SBERT-NLI objective", objective, OBJECTIVES)
        mini_batch_size = base.get("mini_batch_size")
        if mini_batch_size is not None and objective != "mnrl":
            raise ConfigError(f"model.mini_batch_size={mini_batch_size!r} applies to objective=mnrl only (the softmax "
                              "objective has no in-batch negatives: use trainer.accumulate_grad_batches)")
        if base.get("matryoshka_dims") is not None and objective != "mnrl":
            raise ConfigError("model.matryoshka_dims applies to objective=mnrl only (the softmax classifier reads the "
                              "whole vector)")
        super().__init__(model_name_or_path, **base)
        # mnrl has no classifier: a parameter without gradients would need DDP's unused-parameter search
        self.classifier = nn.Linear(3 * self.embedding_dim, int(num_labels)) if objective == "softmax" else None
        # train/acc over the global batch (correct and total summed across ranks), not one rank's
        self.train_accuracy = accuracy(num_labels, sync_on_step=True) if objective == "softmax" else None

    def forward(self, sentences1: list[str], sentences2: list[str]) -> Tensor:
        """Classifier logits ``(batch, num_labels)`` for aligned sentence pairs.

        Both sides share ONE padded forward pass (same dropout distribution as two passes, cheaper).
        """
        return self.logits(self.tokenize(sentences1), self.tokenize(sentences2))

    def logits(self, ids1: list[list[int]], ids2: list[list[int]]) -> Tensor:
        """``forward`` of tokenized pairs (the training step's ids come from the DataLoader's workers)."""
        if self.classifier is None:
            raise ConfigError("objective=mnrl has no NLI classifier; forward() is the softmax objective's")
        n = len(ids1)
        if n != len(ids2):
            raise ValueError(f"sentence lists differ in length: {n} vs {len(ids2)}")
        emb = self.embed_ids([*ids1, *ids2])
        return self.classifier(sbert_softmax_logits_input(emb[:n], emb[n:]))

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        objective = self.hparams.objective
        if BATCH_KEYS[objective] not in batch:
            raise ConfigError(f"model.objective={objective} needs NLI batches of data.format={FORMAT_OF[objective]} "
                              f"(got batch keys {sorted(batch)})")
        if objective == "mnrl":
            return self._mnrl_step(batch)
        logits = self.logits(self.batch_ids(batch, "sentences1"), self.batch_ids(batch, "sentences2"))
        labels = batch["labels"]
        loss = sbert_nli_loss(logits, labels)
        self.train_accuracy(logits.detach().argmax(-1), labels)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(labels))
        self.log("train/acc", self.train_accuracy, on_step=True, on_epoch=False, batch_size=len(labels))
        return loss

    def _mnrl_step(self, batch: dict) -> Tensor:
        """One padded pass over anchors, positives and negatives (cached: mini-batches); loss against the global batch."""
        n, scale = len(batch["anchors"]), self.hparams.scale
        ids = [*self.batch_ids(batch, "anchors"), *self.batch_ids(batch, "positives"), *self.batch_ids(batch, "negatives")]
        loss = self.embed_and_loss(ids, self.with_matryoshka(
            lambda emb: multiple_negatives_ranking_loss(emb[:n], emb[n:2 * n], emb[2 * n:], scale=scale)))
        self.log("train/loss", loss, prog_bar=True, batch_size=n)
        return loss
