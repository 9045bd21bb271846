"""Our local STS tasks as ``mteb`` STS tasks, so mteb's own evaluator runs offline on them.

Every subset is pooled into one ``test`` split, what MTEB's STS tasks score and our ``all`` aggregate is; gold
scores keep their scale (correlations ignore mteb's linear ``_normalize``). mteb is imported inside
``mteb_sts_task``, so ``sts`` loads without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sts_lightning.sts.tasks import STSTask

SPLIT = "test"


def pooled_pairs(task: STSTask) -> tuple[list[str], list[str], np.ndarray]:
    """All pairs of all subsets, in subset order (the order ``sts.scoring.score_tasks`` scores them in)."""
    s1 = [s for p in task.subsets.values() for s in p.sentences1]
    s2 = [s for p in task.subsets.values() for s in p.sentences2]
    gold = np.concatenate([np.asarray(p.scores, dtype=np.float64) for p in task.subsets.values()]) \
        if task.subsets else np.zeros(0)
    return s1, s2, gold


def task_sentences(tasks: list[STSTask]) -> list[str]:
    """Every first sentence of every task, then every second one: ``score_tasks``'s one ``represent`` call."""
    pooled = [pooled_pairs(t) for t in tasks]
    return [s for s1, _, _ in pooled for s in s1] + [s for _, s2, _ in pooled for s in s2]


def mteb_sts_task(task: STSTask, name: str | None = None) -> Any:
    """An ``mteb`` ``AbsTaskSTS`` instance holding ``task``'s pooled pairs as its ``test`` split (data loaded)."""
    from datasets import Dataset, DatasetDict
    from mteb.abstasks.sts import AbsTaskSTS
    from mteb.abstasks.task_metadata import TaskMetadata

    s1, s2, gold = pooled_pairs(task)
    low, high = (float(gold.min()), float(gold.max())) if gold.size and np.ptp(gold) > 0 else (0.0, 5.0)
    task_metadata = TaskMetadata(
        name=name or f"local-{task.name}",
        description=f"Local STS task {task.name!r} of sts-lightning ({task.num_pairs} pairs, subsets pooled).",
        reference="https://github.com/embeddings-benchmark/mteb",
        dataset={"path": "local", "revision": "local"},
        type="STS", category="t2t", modalities=["text"], eval_splits=[SPLIT], eval_langs=["eng-Latn"],
        main_score="cosine_spearman", date=("2012-01-01", "2017-12-31"), domains=[], task_subtypes=[],
        license="not specified", annotations_creators="human-annotated", dialect=[], sample_creation="found",
        bibtex_citation="",
    )

    class LocalSTSTask(AbsTaskSTS):
        """Data given at construction; ``load_data`` has nothing to download."""

        metadata = task_metadata
        min_score = low
        max_score = high

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            self.data_loaded = True

    mteb_task = LocalSTSTask()
    mteb_task.dataset = DatasetDict({SPLIT: Dataset.from_dict(
        {"sentence1": s1, "sentence2": s2, "score": gold.tolist()})})
    mteb_task.data_loaded = True
    return mteb_task
