"""Which of CT's two copies is kept: at each validation the STS callback scores both, the better one is selected.

Why at the START of validation: Lightning runs callbacks' ``on_validation_epoch_end`` before the module's, so the
STS callback's ``val/<task>_spearman`` (monitored by ModelCheckpoint) is then the kept copy's score. Every rank gets
the same metrics, so all select the same copy; the module's ``selected_copy`` buffer makes checkpoints and export agree.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.scoring.protocols import STSEvaluator


def sts_callback(trainer) -> STSEvaluator | None:
    found = [c for c in trainer.callbacks if isinstance(c, STSEvaluator)]
    return found[0] if found else None


def check_select_task(trainer, task: str) -> None:
    """At fit start: ``task`` must be one the STS callback scores."""
    cb = sts_callback(trainer)
    if cb is not None and task not in cb.task_names:
        raise ConfigError(f"model.select_task={task!r} is not among the STS callback's "
                          f"tasks {cb.task_names}: CT could not pick the better copy")


def select_copy(module) -> None:
    """Score both copies, keep the better, log ``val/model{1,2}_<task>_spearman`` and ``val/ct_selected``."""
    trainer = module.trainer
    cb = sts_callback(trainer)
    if cb is None or trainer.sanity_checking:
        return
    if trainer.state.fn == "fit" and (trainer.current_epoch + 1) % cb.every_n_epochs != 0:
        return  # the callback will not evaluate this time either
    key = f"val/{module.hparams.select_task}_spearman"
    scores = {}
    for copy in (1, 2):
        with forced_copy(module, copy):
            metrics = cb.evaluate(trainer, module)
        scores[copy] = metrics[key]
        for name, value in metrics.items():
            if name.endswith("_spearman") and name != "val/sts_avg_spearman":
                module.log(name.replace("val/", f"val/model{copy}_", 1), value, rank_zero_only=False, sync_dist=False)
    best = 2 if scores[2] > scores[1] else 1  # ties (and NaN) keep model 1
    module.selected_copy.fill_(best)
    module.log("val/ct_selected", float(best), rank_zero_only=False, sync_dist=False)


@contextlib.contextmanager
def forced_copy(module, copy: int) -> Iterator[None]:
    """``module.scorer()`` is copy ``copy`` meanwhile."""
    module._eval_copy = copy
    try:
        yield
    finally:
        module._eval_copy = None
