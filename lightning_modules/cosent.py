"""Supervised STS on scored pairs: SBERT's CosineSimilarityLoss, CoSENT or AnglE (``model.objective``).

One encoder embeds both sentences of each pair (siamese); the objective compares the pairs' similarities with their
gold scores in [0, 1] (``datamodules.scored_pairs``), and the pooled vector is what is evaluated and exported:

* ``cosent`` (default): each pair ranked against every pair of the global batch with a higher gold score (Su 2022);
* ``angle``: the same ranking on AnglE's angle similarity (Li & Li 2023), which does not saturate near cosine +-1;
* ``angle_full``: AnglE's whole objective (CoSENT + in-batch negatives + the angle ranking, the authors' weights);
* ``cosine``: SBERT's regression of the cosine onto the gold score (Reimers & Gurevych 2019).

Recipe: sentence-transformers' ``training_stsbenchmark.py``; under DDP the ranking objectives gather every rank's
similarities (the same global-batch loss as one GPU).
"""

from __future__ import annotations

from torch import Tensor

from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.methods.cosent import METHOD
from sts_lightning.embeddings.methods.cosent.objective import (
    angle_full_loss,
    angle_loss,
    cosent_loss,
    cosine_similarity_loss,
)
from sts_lightning.lightning_modules.arg_rules import check_args
from sts_lightning.lightning_modules.base import EncoderModule

OBJECTIVES = tuple(METHOD.variants)  # cosent | angle | angle_full | cosine: each names its paper on the card
# angle_full's weights and temperatures (defaults: the authors', in the constructor; objective.angle_full_loss)
ANGLE_FULL = ("cosine_w", "ibn_w", "angle_w", "cosine_tau", "ibn_tau", "angle_tau")


def check_options(objective: str, scale: float, angle_full: dict[str, float]) -> None:
    """One ``ConfigError`` line naming the key of a bad objective, scale, temperature or weights, before loading."""
    if objective not in OBJECTIVES:
        raise unknown_choice("model.objective", objective, OBJECTIVES)
    check_args({"scale": scale, **angle_full})  # scale: the inverse temperature of the cosent / angle ranking
    if not any(angle_full[k] for k in ("cosine_w", "ibn_w", "angle_w")):
        raise ConfigError("model.cosine_w, model.ibn_w and model.angle_w are all 0: objective=angle_full needs one > 0")


class CoSENTModule(EncoderModule):
    """A siamese encoder trained on scored pairs; ``*_w`` / ``*_tau``: ``angle_full``'s weights w1-w3 and scales."""

    text_fields = ("sentences1", "sentences2")  # tokenized in the DataLoader's workers
    matryoshka_ok = METHOD.matryoshka_ok

    def __init__(self, model_name_or_path: str = "paraphrase-MiniLM-L3-v2", *, objective: str = "cosent",
                 scale: float = 20.0, gather: bool = True, cosine_w: float = 1.0, ibn_w: float = 1.0,
                 angle_w: float = 1.0, cosine_tau: float = 20.0, ibn_tau: float = 20.0, angle_tau: float = 1.0,
                 **base) -> None:
        check_options(objective, scale, {"cosine_w": cosine_w, "ibn_w": ibn_w, "angle_w": angle_w,
                                         "cosine_tau": cosine_tau, "ibn_tau": ibn_tau, "angle_tau": angle_tau})
        super().__init__(model_name_or_path, **base)
        # the card names the objective's paper (the declaration's variants); the key stays the method's name
        self.method_info = METHOD.card(objective)

    def forward(self, sentences1: list[str], sentences2: list[str]) -> tuple[Tensor, Tensor]:
        """Pooled vectors of both sides from ONE pass over the concatenated sentences (one dropout draw)."""
        return self.embed_pairs(self.tokenize(sentences1), self.tokenize(sentences2))

    def embed_pairs(self, ids1: list[list[int]], ids2: list[list[int]]) -> tuple[Tensor, Tensor]:
        """``forward`` of tokenized pairs (the training step's ids come from the DataLoader's workers)."""
        n = len(ids1)
        if n != len(ids2):
            raise ValueError(f"sentence lists differ in length: {n} vs {len(ids2)}")
        emb = self.embed_ids([*ids1, *ids2])
        return emb[:n], emb[n:]

    def loss(self, u: Tensor, v: Tensor, scores: Tensor) -> Tensor:
        """The configured objective on the two sides' embeddings and the gold scores."""
        hp = self.hparams
        if hp.objective == "cosine":
            return cosine_similarity_loss(u, v, scores)
        if hp.objective == "angle_full":
            return angle_full_loss(u, v, scores, gather=bool(hp.gather), **{k: float(hp[k]) for k in ANGLE_FULL})
        ranking = cosent_loss if hp.objective == "cosent" else angle_loss
        return ranking(u, v, scores, scale=float(hp.scale), gather=bool(hp.gather))

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        if "scores" not in batch:
            raise ConfigError(f"model=cosent needs scored-pair batches (data=scored_pairs), got batch keys "
                              f"{sorted(batch)}")
        u, v = self.embed_pairs(self.batch_ids(batch, "sentences1"), self.batch_ids(batch, "sentences2"))
        scores = batch["scores"].to(u.device)
        loss = self.with_matryoshka(lambda u, v: self.loss(u, v, scores))(u, v)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(scores))
        return loss
