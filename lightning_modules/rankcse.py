"""RankCSE (Liu et al., ACL 2023): unsupervised SimCSE plus listwise distillation of teachers' similarity rankings.

The student embeds each sentence twice with dropout (SimCSE's views, InfoNCE); frozen teachers' vectors of the
same sentences (``data=distillation data.combine=each``) give each anchor's ranking of the batch, which the student's
list learns by ListMLE or ListNet, with the two views' lists kept consistent (maths and reference parity:
``embeddings.methods.rankcse.objective``). A subclass of ``SimCSEModule``: the student IS unsupervised SimCSE; only
the batch and the loss differ. Recipe defaults: the reference's ``run_rankcse.sh``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from torch import Tensor

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.cross_encoder.scorer import load_cross_encoder
from sts_lightning.embeddings.methods.rankcse import CONSISTENCY, METHOD, RANKING_LOSSES
from sts_lightning.embeddings.methods.rankcse.objective import pair_teacher_list, rankcse_loss, teacher_scores
from sts_lightning.embeddings.methods.shared.in_batch import gather_sentences, gather_with_grad
from sts_lightning.lightning_modules.arg_rules import check_args, check_choice
from sts_lightning.lightning_modules.simcse import SimCSEModule


class RankCSEModule(SimCSEModule):
    """The RankCSE student; ``teacher_weights`` (``data.teachers`` order, then ``pair_teachers``) are the reference's
    ``alpha, 1 - alpha``; ``pair_teachers``: cross-encoder directories whose pair scores rank the batch like a vector
    teacher's cosines (``pair_batch_size`` pairs per forward pass)."""

    method_info = METHOD.card()

    def __init__(self, model_name_or_path: str = "paraphrase-MiniLM-L3-v2", *, ranking_loss: str = "listmle",
                 teacher_weights: Sequence[float] | None = [0.33, 0.67],  # noqa: B006 - read only, as the yaml writes it
                 teacher_temperature: float = 0.05,
                 rank_temperature: float | None = None, distillation_weight: float = 1.0, consistency_weight: float = 1.0,
                 consistency: str = "jsd", pair_teachers: Sequence[str] = (), pair_batch_size: int = 256,
                 **base) -> None:
        check_choice("model.ranking_loss", ranking_loss, RANKING_LOSSES)
        check_choice("model.consistency", consistency, CONSISTENCY)
        check_args({"teacher_weights": teacher_weights, "teacher_temperature": teacher_temperature,
                    "rank_temperature": rank_temperature, "distillation_weight": distillation_weight,
                    "consistency_weight": consistency_weight})
        pairs = [str(p) for p in ([pair_teachers] if isinstance(pair_teachers, str) else pair_teachers)]
        check_args({"pair_batch_size": pair_batch_size})
        for path in pairs:
            if not Path(path).expanduser().is_dir():
                raise ConfigError(f"model.pair_teachers: {path!r} is not a directory (a cross-encoder export, e.g. "
                                  "outputs/<run>/export of model=cross_encoder)")
        if base.setdefault("objective", "unsupervised") != "unsupervised":
            raise ConfigError(f"model.objective={base['objective']!r}: RankCSE is unsupervised (two dropout views)")
        super().__init__(model_name_or_path, **base)
        self.method_info = METHOD.card()
        self.teacher_weights = None if teacher_weights is None else [float(w) for w in teacher_weights]
        self.pair_teachers = pairs
        self.__dict__["_pair_scorers"] = None  # loaded on first use, frozen: in no checkpoint, no optimizer

    def weights_for(self, teachers: int) -> list[float]:
        """The configured weights, checked against the batch's teachers (equal weights when none are set)."""
        if self.teacher_weights is None:
            return [1.0] * teachers
        if len(self.teacher_weights) != teachers:
            raise ConfigError(f"model.teacher_weights has {len(self.teacher_weights)} weights but the data has "
                              f"{teachers} teacher(s) (data.teachers): give one weight per teacher, or null")
        return self.teacher_weights

    def teacher_list(self, teachers: Sequence[Tensor], sentences: Sequence[str] = ()) -> Tensor:
        """This rank's rows of the teachers' combined list over the global batch: the vector teachers gathered from
        every rank, then each pair teacher (``pair_teachers``) on (this rank's sentence, every batch sentence); the
        weights (``data.teachers`` order, then ``pair_teachers``) normalised over all of them."""
        weights = self.weights_for(len(teachers) + len(self.pair_teachers))
        total, tau = float(sum(weights)), float(self.hparams.teacher_temperature)
        out = None
        if teachers:
            gathered, offset = zip(*(gather_with_grad(t.detach()) for t in teachers), strict=True)
            share = sum(weights[:len(teachers)]) / total
            out = teacher_scores(list(gathered), weights[:len(teachers)], tau, offset=offset[0],
                                 rows=teachers[0].shape[0]) * share
        if self.pair_teachers:
            everyone = gather_sentences(list(sentences))
            for scorer, weight in zip(self.pair_scorers(), weights[len(teachers):], strict=True):
                part = pair_teacher_list(scorer, sentences, everyone).to(self.device) * (weight / total / tau)
                out = part if out is None else out + part
        return out

    def pair_scorers(self) -> list:
        """The pair teachers, frozen, on this module's device (loaded once, at the first step)."""
        if self._pair_scorers is None:
            self.__dict__["_pair_scorers"] = [
                load_cross_encoder(path, batch_size=int(self.hparams.pair_batch_size), device=str(self.device))
                for path in self.pair_teachers]
            for scorer in self._pair_scorers:
                scorer.model.requires_grad_(False)
        return self._pair_scorers

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        if "teachers" not in batch and not self.pair_teachers:
            raise ConfigError(f"RankCSE needs sentences with each teacher's vectors (data=distillation "
                              f"data.combine=each) or model.pair_teachers; got batches with keys {sorted(batch)}")
        if not self.encoder_model.training:  # dropout makes the two views: enforce it
            self.encoder_model.train()
        teacher = self.teacher_list(batch.get("teachers", []), batch["sentences"])
        hp = self.hparams
        parts = {}

        def loss_fn(emb: Tensor) -> Tensor:
            view1, view2 = emb.chunk(2, dim=0)
            out = rankcse_loss(view1, view2, teacher, temperature=hp.temperature, ranking_loss=hp.ranking_loss,
                               gamma=hp.distillation_weight, beta=hp.consistency_weight, consistency=hp.consistency,
                               rank_temperature=hp.rank_temperature)
            parts[emb.shape[-1]] = out  # per prefix width (Matryoshka); the cached loss may call this twice
            return out["loss"]

        ids = self.training_ids(batch)
        # cached (GradCache) when model.mini_batch_size is set; Matryoshka: the whole RankCSE loss on each prefix
        loss = self.embed_and_loss(ids, self.with_matryoshka(loss_fn))
        n = len(ids) // 2
        self.log("train/loss", loss, prog_bar=True, batch_size=n)
        for name in ("infonce", "consistency", "distillation"):
            self.log(f"train/{name}", parts[max(parts)][name].detach(), batch_size=n)  # the widest trained prefix's
        return loss

