"""Per-pair similarities on disk (``.npz``): what a paired comparison (``sts.paired``) needs after the run.

Per task (the pooled pairs in scoring order): every system's similarities (``<system>:<task>``, float32), the gold
scores (``gold:<task>``) and a pair fingerprint (``pairs:<task>``), so runs are compared only on the same pairs.
Plain arrays (``allow_pickle=False``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.io.atomic import atomic_file
from sts_lightning.sts.bootstrap import Bootstrap
from sts_lightning.sts.paired import PairedTable, pair_fingerprint, paired_table
from sts_lightning.sts.tasks import STSTask


@dataclass
class TaskPairs:
    """One task's pooled gold scores and fingerprint."""

    gold: np.ndarray
    fingerprint: str


def task_pairs(task: STSTask) -> TaskPairs:
    """The pooled pairs of ``task`` in ``sts.scoring.aggregate``'s order (subsets concatenated)."""
    subsets = list(task.subsets.values())
    gold = np.concatenate([p.scores for p in subsets]).astype(np.float64)
    s1 = [s for p in subsets for s in p.sentences1]
    s2 = [s for p in subsets for s in p.sentences2]
    return TaskPairs(gold, pair_fingerprint(s1, s2, gold))


def pooled(task: STSTask, predictions: Mapping[str, np.ndarray]) -> np.ndarray:
    """One task's per-subset similarities pooled in the same order as ``task_pairs``."""
    return np.concatenate([np.asarray(predictions[name]) for name in task.subsets])


def write_predictions(path: Path, systems: Mapping[str, Mapping[str, np.ndarray]],
                      pairs: Mapping[str, TaskPairs]) -> Path:
    """``systems``: {system key: {task: pooled similarities}}; written atomically, compressed."""
    arrays: dict[str, np.ndarray] = {}
    for task, tp in pairs.items():
        arrays[f"gold:{task}"] = tp.gold
        arrays[f"pairs:{task}"] = np.array(tp.fingerprint)
    for key, per_task in systems.items():
        for task, sims in per_task.items():
            if task not in pairs or np.asarray(sims).shape != pairs[task].gold.shape:
                raise ValueError(f"{key}:{task}: similarities without matching gold scores")
            arrays[f"{key}:{task}"] = np.asarray(sims, dtype=np.float32)
    with atomic_file(path) as tmp, open(tmp, "wb") as f:
        np.savez_compressed(f, **arrays)
    return path


@dataclass
class SystemPredictions:
    """One system of a predictions file: its similarities and the pairs they are on, per task."""

    source: str  # "<file> (<system>)": what an error names
    sims: dict[str, np.ndarray]
    pairs: dict[str, TaskPairs]


def read_predictions(path: Path, system: str) -> SystemPredictions:
    """The tasks that ``system`` has in the file at ``path`` (one clear ``DataError`` for a broken file)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            sims = {k.split(":", 1)[1]: data[k].astype(np.float64) for k in data.files if k.startswith(f"{system}:")}
            pairs = {t: TaskPairs(data[f"gold:{t}"], str(data[f"pairs:{t}"])) for t in sims}
    except (OSError, ValueError, KeyError) as err:
        raise DataError(f"{path} is not a predictions file ({type(err).__name__}: {err})") from None
    return SystemPredictions(f"{path} ({system})", sims, pairs)


def check_same_pairs(systems: Sequence[SystemPredictions], task: str) -> np.ndarray:
    """The gold scores of ``task`` shared by every system, or one ``DataError`` naming two that differ."""
    first = systems[0]
    for other in systems[1:]:
        if other.pairs[task].fingerprint != first.pairs[task].fingerprint:
            raise DataError(f"{first.source} and {other.source} were not scored on the same pairs of {task} "
                            f"({first.pairs[task].gold.size} vs {other.pairs[task].gold.size} pairs, or another "
                            "order / gold): a paired comparison needs the same pairs; compare them without it "
                            "(--samples 0)")
    return first.pairs[task].gold


@dataclass
class RunPredictions:
    """An evaluate run's similarities: one ``{task: {subset: array}}`` per results row (``{}``: an n/a row)."""

    tasks: list[STSTask]
    rows: list[dict[str, dict[str, np.ndarray]]]
    bootstrap: Bootstrap

    FILE = "predictions.npz"

    def systems(self) -> dict[str, dict[str, np.ndarray]]:
        """``{"row<i>": {task: pooled similarities}}`` for every row that was scored."""
        return {f"row{i}": {t.name: pooled(t, row[t.name]) for t in self.tasks}
                for i, row in enumerate(self.rows) if row}

    def write(self, out_dir: Path) -> Path:
        return write_predictions(Path(out_dir) / self.FILE, self.systems(), {t.name: task_pairs(t) for t in self.tasks})

    def paired(self) -> tuple[list[int], PairedTable] | None:
        """(the scored rows' indices, their ``PairedTable``); None with under two such rows or no bootstrap."""
        systems = self.systems()
        if len(systems) < 2 or not self.bootstrap.enabled:
            return None
        gold = {t.name: task_pairs(t).gold for t in self.tasks}
        table = paired_table(list(systems.values()), gold, self.bootstrap.samples, self.bootstrap.seed)
        return [int(k[3:]) for k in systems], table
