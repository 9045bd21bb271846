"""STS evaluation during training through ``pl_module.scorer()``, one evaluator for every method.

Under DDP each rank encodes its shard of the de-duplicated sentences (a ``PairScorer``: scores its shard of the
pairs); rank 0 computes the correlations once and
broadcasts them, so every rank logs identical values (Spearman is never averaged across ranks).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from pathlib import Path

import lightning as L
import numpy as np
import torch

from sts_lightning.callbacks.frozen_readings import FrozenReadings
from sts_lightning.callbacks.preemption import agreement
from sts_lightning.callbacks.sts_metrics import AVG_KEY, before_after_table, flat_metrics, spearman_line
from sts_lightning.callbacks.sts_shards import PAIR_SCORES, gather_pair_scores, gather_shards, shard_for_rank
from sts_lightning.embeddings.encoders.base import validate_sentences
from sts_lightning.embeddings.encoders.token_budget import batching, check_batching
from sts_lightning.embeddings.io.atomic import atomic_write
from sts_lightning.embeddings.isolated_rng import rng_isolated
from sts_lightning.embeddings.scoring.protocols import BatchedScorer, Scorable
from sts_lightning.embeddings.scoring.scorer import PairScorer, Representation, Scorer, take
from sts_lightning.embeddings.stop_request import check_stop, stretch
from sts_lightning.sts.geometry import tasks_geometry
from sts_lightning.sts.predictions import pooled, task_pairs, write_predictions
from sts_lightning.sts.scoring import aggregate, main_score
from sts_lightning.sts.tasks import STSTask, expand_groups, load_tasks

PREDICTIONS_DIR = "sts_predictions"  # <run dir>/sts_predictions/{before,after}.npz: compare_runs' paired differences
log = logging.getLogger(__name__)


def _last_epoch(trainer: L.Trainer) -> bool:
    """Whether the current epoch is the last one ``max_epochs`` allows (the fit's final scoring is due)."""
    return trainer.max_epochs is not None and trainer.current_epoch + 1 >= trainer.max_epochs > 0


class STSEvaluationCallback(L.Callback):
    """Logs ``val/<task>_spearman`` / ``_pearson``, ``val/sts_avg_spearman`` and, for one-vector representations,
    ``val/<task>_alignment`` / ``_uniformity``. Keep ``every_n_epochs=1`` and use ``check_val_every_n_epoch`` when a
    checkpoint monitors the metric. ``probe_poolings``: further poolings of the live encoder, logged as
    ``probe/<pooling>/<task>_spearman``; they rank no checkpoint and enter no before/after table.
    """

    def __init__(self, tasks: Sequence[str] = ("stsb-dev",), data_dir: str | None = None, batch_size: int | None = 64,
                 every_n_epochs: int = 1, eval_at_start: bool = False, source: str = "local",
                 probe_poolings: Sequence[str] = (), max_tokens: int | None = None) -> None:
        if isinstance(tasks, str):
            tasks = [tasks]
        if not tasks:
            raise ValueError("STSEvaluationCallback needs at least one task")
        if every_n_epochs < 1:
            raise ValueError(f"every_n_epochs must be >= 1, got {every_n_epochs}")
        self.task_names = expand_groups(tasks)  # a group (tasks=[standard]) stands for its tasks
        self.data_dir = data_dir
        check_batching(batch_size, max_tokens)
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.every_n_epochs = int(every_n_epochs)
        self.eval_at_start = bool(eval_at_start)
        self.source = source
        self.probe_poolings = [str(p) for p in ([probe_poolings] if isinstance(probe_poolings, str) else probe_poolings)]
        self.tasks: list[STSTask] | None = None
        self.last_results: dict[str, dict] | None = None  # score_tasks-shaped: {task: aggregate(...)}
        self.last_metrics: dict[str, float] | None = None
        self.start_metrics: dict[str, float] | None = None
        self.last_step: int | None = None  # global step of the last evaluation (None: none yet)
        self._frozen = FrozenReadings()
        self._sims: dict[str, dict[str, np.ndarray]] | None = None  # rank 0: the main scorer's last similarities

    # ------------------------------------------------------------------ setup: tasks and pair indices
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.tasks is not None:
            return
        self.tasks = load_tasks(self.task_names, self.data_dir, source=self.source)
        s1: list[str] = []
        s2: list[str] = []
        self._spans: list[tuple[STSTask, str, int, int]] = []
        for task in self.tasks:
            for name, pairs in task.subsets.items():
                self._spans.append((task, name, len(s1), len(s1) + len(pairs)))
                s1.extend(pairs.sentences1)
                s2.extend(pairs.sentences2)
        validate_sentences(s1, "sentences1")
        validate_sentences(s2, "sentences2")
        self._s1, self._s2 = s1, s2  # a PairScorer's units: the pairs themselves
        # Same order as Scorer.score_pairs, so a single process encodes exactly what score_tasks encodes.
        self.unique = list(dict.fromkeys([*s1, *s2]))
        index = {s: i for i, s in enumerate(self.unique)}
        self._rows1 = torch.tensor([index[s] for s in s1], dtype=torch.long)
        self._rows2 = torch.tensor([index[s] for s in s2], dtype=torch.long)

    # ------------------------------------------------------------------ hooks
    def state_dict(self) -> dict:
        """The "before" scores travel in every checkpoint: a resumed run's table compares with the true start."""
        return {"start_metrics": dict(self.start_metrics)} if self.start_metrics else {}

    def load_state_dict(self, state_dict: dict) -> None:
        if state_dict.get("start_metrics"):
            self.start_metrics = {k: float(v) for k, v in state_dict["start_metrics"].items()}

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self.eval_at_start:
            return
        if self.start_metrics is not None and trainer.global_step > 0:
            # Resumed: the weights here are the resume point, not the start; the checkpoint kept the start.
            if trainer.is_global_zero:
                log.info("STS Spearman x100 before training (kept in the checkpoint): %s",
                         spearman_line(self.start_metrics))
            return
        if trainer.is_global_zero:  # seconds to minutes on a CPU: say what runs before the first step
            log.info("scoring STS before training (%s) ...", ", ".join(self.task_names))
        metrics = self.evaluate(trainer, pl_module, stage="before")
        self.start_metrics = metrics
        if trainer.is_global_zero:  # loggers write on rank 0 only; every rank took part in evaluate()
            log.info("STS Spearman x100 before training: %s", spearman_line(metrics))
            for logger in trainer.loggers:
                logger.log_metrics(metrics, step=trainer.global_step)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        """At ``max_steps``, stop by Lightning's early-stop path, which validates first (a mid-epoch end would not)."""
        if 0 < trainer.max_steps <= trainer.global_step:
            trainer.should_stop = True
            if trainer.check_val_every_n_epoch not in (None, 1):
                # Validation is otherwise gated to epoch multiples; the last step must be scored whatever its epoch.
                trainer.check_val_every_n_epoch = 1

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """The last epoch validates even when ``check_val_every_n_epoch`` does not divide ``max_epochs``."""
        if _last_epoch(trainer) and trainer.check_val_every_n_epoch not in (None, 1):
            trainer.check_val_every_n_epoch = 1

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        final = trainer.should_stop or _last_epoch(trainer)
        if trainer.state.fn == "fit" and (trainer.current_epoch + 1) % self.every_n_epochs != 0 and not final:
            return
        metrics = self.evaluate(trainer, pl_module)
        self.last_step = trainer.global_step
        for key, value in metrics.items():
            pl_module.log(key, value, prog_bar=key == AVG_KEY, rank_zero_only=False, sync_dist=False)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Score the final weights if no validation did, then write ``sts_before_after.md`` (rank 0)."""
        if trainer.state.fn == "fit" and self.last_step != trainer.global_step:
            log.warning("no validation ran at the final step %d: scoring STS now (no best checkpoint is ranked "
                        "without a validation loop)", trainer.global_step)
            metrics = self.evaluate(trainer, pl_module)
            self.last_step = trainer.global_step
            trainer.callback_metrics.update({k: torch.tensor(v) for k, v in metrics.items()})
            if trainer.is_global_zero:
                for logger in trainer.loggers:
                    logger.log_metrics(metrics, step=trainer.global_step)
        start, last = self.start_metrics, self.last_metrics
        if not (trainer.is_global_zero and start and last):
            return
        table = before_after_table(start, last)  # train() prints it in the run summary
        atomic_write(Path(trainer.default_root_dir) / "sts_before_after.md", (table + "\n").encode())

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """A run stopped in its final scoring resumes into a finished fit (no training hook runs): score it here."""
        table = Path(trainer.default_root_dir) / "sts_before_after.md"
        if self.last_step is None and trainer.global_step > 0 and self.start_metrics and not table.is_file():
            self.on_train_end(trainer, pl_module)

    # ------------------------------------------------------------------ evaluation
    @rng_isolated  # scoring (a frozen scorer loaded on first use, MC dropout) never shifts the training's random stream
    def evaluate(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str = "after") -> dict[str, float]:
        """Collective: every rank must call it; the flat metrics, identical on every rank."""
        if self.tasks is None:
            self.setup(trainer, pl_module, "validate")
        if not isinstance(pl_module, Scorable):
            raise TypeError(f"{type(pl_module).__name__} must define scorer() -> embeddings.scoring.scorer.Scorer "
                            "built on its live modules for STSEvaluationCallback (embeddings.scoring.protocols)")
        if self.probe_poolings and not callable(getattr(pl_module, "probe_scorer", None)):
            raise TypeError(f"callbacks.sts_evaluation.probe_poolings needs {type(pl_module).__name__}.probe_scorer("
                            "pooling) (an EncoderModule method); this module has none")
        modes = [(m, m.training) for m in pl_module.modules()]
        pl_module.eval()
        try:
            # a SIGTERM stops the encoding within a batch, on every rank at the same one (callbacks/preemption.py)
            with stretch("scoring STS", agreement(trainer)), torch.inference_mode():
                outcome = self._scored(trainer, pl_module, pl_module.scorer())
                sims, self._sims = self._sims, None
                probes = {p: self._scored(trainer, pl_module, pl_module.probe_scorer(p)) for p in self.probe_poolings}
        finally:
            for module, was_training in modes:  # per submodule: frozen parts stay in eval mode
                module.train(was_training)
        self.last_results = outcome
        self.last_metrics = flat_metrics(outcome)
        if sims is not None and trainer.is_global_zero and trainer.state.fn == "fit":
            self._save_predictions(trainer, sims, stage)
        probe_metrics = {f"probe/{pooling}/{task}_spearman": main_score(result, "spearman")
                         for pooling, results in probes.items() for task, result in results.items()}
        if probe_metrics and trainer.is_global_zero:
            log.info("STS Spearman x100 of the probe poolings: %s", ", ".join(
                f"{k[len('probe/'):-len('_spearman')]} {v:.2f}" for k, v in probe_metrics.items()))
        return {**self.last_metrics, **probe_metrics}

    def _save_predictions(self, trainer: L.Trainer, sims: dict[str, dict[str, np.ndarray]], stage: str) -> None:
        """``<run dir>/sts_predictions/<stage>.npz``: the per-pair similarities, which ``compare_runs`` pairs."""
        tasks = self.tasks or []
        write_predictions(Path(trainer.default_root_dir) / PREDICTIONS_DIR / f"{stage}.npz",
                          {"pred": {t.name: pooled(t, sims[t.name]) for t in tasks}},
                          {t.name: task_pairs(t) for t in tasks})

    def _scored(self, trainer: L.Trainer, pl_module: L.LightningModule, scorer: Scorer) -> dict[str, dict]:
        """Collective: one scorer's per-task aggregates, computed on rank 0 and broadcast to every rank."""
        check_stop()
        rep = gather_pair_scores(trainer.strategy, scorer, self._s1, self._s2, trainer.global_rank,
                                 trainer.world_size, pl_module.device) if isinstance(scorer, PairScorer) \
            else self.gather_representation(trainer, pl_module, scorer)
        outcome = self._score(scorer, rep) if trainer.is_global_zero else None
        outcome = trainer.strategy.broadcast(outcome, src=0)
        if isinstance(outcome, str):  # rank 0 failed: raise on every rank instead of hanging the others
            raise RuntimeError(f"STS evaluation failed on rank 0: {outcome}")
        return outcome

    def gather_representation(self, trainer: L.Trainer, pl_module: L.LightningModule,
                              scorer: Scorer) -> Representation:
        """Encode this rank's shard, all-gather the shards, return the full representation (unique order, CPU)."""
        world_size, rank = trainer.world_size, trainer.global_rank
        shard = shard_for_rank(self.unique, rank, world_size)
        batched = isinstance(scorer, BatchedScorer)
        previous = scorer.batch_size if batched else None
        if batched:
            scorer.batch_size = self.batch_size
        try:
            with batching(getattr(scorer, "encoder", None), self.batch_size, self.max_tokens):
                rep = self._frozen.represent(scorer, shard, self.batch_size if batched else None)
        finally:
            if batched:
                scorer.batch_size = previous
        if world_size == 1:
            return {k: v.cpu() for k, v in rep.items()}
        return gather_shards(trainer.strategy, rep, pl_module.device, len(self.unique))

    def _score(self, scorer: Scorer, rep: Representation) -> dict[str, dict] | str:
        """Per-task aggregates exactly as ``score_tasks``; a failure is returned as text to broadcast."""
        try:
            sims = rep[PAIR_SCORES] if isinstance(scorer, PairScorer) \
                else scorer.similarity(take(rep, self._rows1), take(rep, self._rows2))
            sims = sims.float().cpu().numpy().astype(np.float64)
            preds: dict[str, dict[str, np.ndarray]] = {}
            for task, name, lo, hi in self._spans:
                preds.setdefault(task.name, {})[name] = sims[lo:hi]
            results = {}
            geometry = tasks_geometry(rep, self._rows1, self._rows2, self._spans)
            for task in self.tasks or []:
                task_preds = preds[task.name]
                if not all(np.all(np.isfinite(p)) for p in task_preds.values()):
                    # A diverged model should not kill training: constant predictions give NaN metrics,
                    # which ModelCheckpoint never ranks as best.
                    warnings.warn(f"scorer {scorer.name!r} produced non-finite similarities on {task.name}; "
                                  "logging NaN", RuntimeWarning, stacklevel=2)
                    task_preds = {n: np.zeros_like(p) for n, p in task_preds.items()}
                preds[task.name] = task_preds
                results[task.name] = aggregate(task, task_preds)
                if task.name in geometry:
                    results[task.name]["geometry"] = geometry[task.name]
            self._sims = preds  # kept on rank 0 for the predictions file (``evaluate``)
            return results
        except Exception as err:  # re-raised on every rank after the broadcast
            return f"{type(err).__name__}: {err}"
