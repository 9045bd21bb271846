"""Paired differences between the rows of a ``compare_runs`` table: a paired bootstrap on the same pairs (refused
when their pairs differ) where both have per-pair similarities on disk, else two seed groups' seeds, else none.
"""

from __future__ import annotations

from dataclasses import dataclass

from sts_lightning.runs.run_results import RunRows
from sts_lightning.sts.paired import AVG, Difference, PairedTable, paired_table, seeds_difference
from sts_lightning.sts.predictions import SystemPredictions, check_same_pairs, read_predictions


@dataclass
class RowDifferences:
    """``difference(column, a, b)``: row ``a`` minus row ``b`` on a task (or ``avg``: the table's average)."""

    table: PairedTable | None
    seeds: list[dict[str, dict[str, float]]]  # per row: a seed group's {seed: {task: x}}, else {}
    common: list[str]  # the tasks the table's average covers

    def difference(self, column: str, a: int, b: int) -> Difference | None:
        if column == AVG and len(self.common) == 1:  # an average of one task is that task
            column = self.common[0]
        if self.table is not None and (d := self.table.difference(column, a, b)) is not None:
            return d
        if self.seeds[a] and self.seeds[b]:
            return seeds_difference(*(self._seed_values(column, r) for r in (a, b)))
        return None

    def _seed_values(self, column: str, row: int) -> dict[str, float]:
        per_seed = self.seeds[row]
        if column == AVG:
            return {s: sum(v[t] for t in self.common) / len(self.common) for s, v in per_seed.items()}
        return {s: v[column] for s, v in per_seed.items() if column in v}


def row_differences(runs: list[RunRows], tasks: list[str], common: list[str], samples: int = 1000,
                    seed: int = 0) -> RowDifferences:
    """Differences for the rows of ``runs`` in ``compare_runs.flatten``'s order; ``samples=0``: seeds only."""
    stages = [(run, stage) for run in runs for stage, _ in run.rows]
    seeds = [run.seeds for run, _ in stages]
    if samples < 1:
        return RowDifferences(None, seeds, common)
    loaded: list[SystemPredictions | None] = [
        read_predictions(*run.predictions[stage]) if stage in run.predictions else None for run, stage in stages]
    gold = {}
    for task in tasks:  # a task two rows have: their pairs must be the same ones
        having = [p for p in loaded if p is not None and task in p.sims]
        if len(having) > 1:
            gold[task] = check_same_pairs(having, task)
    predictions = [{t: p.sims[t] for t in gold if t in p.sims} if p is not None else {} for p in loaded]
    over = common if len(common) > 1 and all(t in gold for t in common) else []
    table = paired_table(predictions, gold, samples, seed, avg_over=over) if gold else None
    return RowDifferences(table, seeds, common)
