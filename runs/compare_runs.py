"""Compare finished runs offline: ``python -m sts_lightning.runs.compare_runs <run dir> [<run dir> ...] --out <dir>``.

Any mix of training and evaluate run directories becomes one markdown table and one PNG dot chart of STS Spearman
x100. A cell is marked ``~`` when its paired difference to its column's best has an interval containing 0 (a paired
bootstrap on the same pairs, or two seed groups' seeds: overlapping separate intervals are not a test).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from sts_lightning.embeddings.errors import DataError, run_or_exit
from sts_lightning.embeddings.io.atomic import atomic_write
from sts_lightning.runs.row_differences import RowDifferences, row_differences
from sts_lightning.runs.run_results import Interval, RunRows, read_run
from sts_lightning.sts.paired import AVG, differences_table
from sts_lightning.sts.score_chart import numbered, save_chart
from sts_lightning.sts.task_order import ordered_tasks

Row = tuple[str, str, dict[str, float]]  # (run label, stage, {task: Spearman x100})
Intervals = dict[str, Interval]  # one row's {task (or "avg"): (lo, hi)}
SAME = "~"
LEGEND = (f"{SAME}: the paired difference to the column's best has a 95% interval that contains 0 (paired bootstrap "
          "over the same pairs; seed groups: mean difference ± its spread): not a difference these data resolve")


def flatten(runs: list[RunRows]) -> list[Row]:
    """One row per (run, stage); a label two runs share gets the run directory's name appended, else a number."""
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.label] = counts.get(run.label, 0) + 1
    labels = numbered([run.label if counts[run.label] == 1 else f"{run.label} ({run.run_dir.name})" for run in runs])
    return [(label, stage, scores) for run, label in zip(runs, labels, strict=True) for stage, scores in run.rows]


def marks(column: str, values: list[float | None], differences: RowDifferences | None) -> list[str]:
    """``~`` for each cell of a column whose paired difference to the column's best contains 0, else ``""``."""
    finite = [i for i, v in enumerate(values) if v is not None and not math.isnan(v)]
    if len(finite) < 2 or differences is None:
        return [""] * len(values)
    best = max(finite, key=lambda i: values[i])  # type: ignore[arg-type, return-value]
    return [SAME if i in finite and i != best and (d := differences.difference(column, i, best)) is not None
            and d.same else "" for i in range(len(values))]


def task_columns(rows: list[Row]) -> tuple[list[str], list[str]]:
    """All tasks in the papers' order (``sts.task_order``), and those every row has (the only fair average)."""
    tasks = ordered_tasks(t for _, _, scores in rows for t in scores)
    common = [t for t in tasks if all(t in scores for _, _, scores in rows)]
    return tasks, common


def _avg_name(tasks: list[str], common: list[str]) -> str | None:
    """``avg``, or ``avg (<the tasks it covers>)`` when some row lacks a task; None when no task is common."""
    if not common:
        return None
    return "avg" if common == tasks else f"avg ({', '.join(common)})"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values and not any(math.isnan(v) for v in values) else math.nan


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"  # the run did not score this task
    return "n/a" if math.isnan(value) else f"{value:.2f}"


def markdown_table(rows: list[Row], differences: RowDifferences | None = None) -> str:
    """run | stage | one column per task | avg (over the tasks every row has), cells marked ``~`` with a legend
    line; below, every row minus the first (where a paired difference exists)."""
    tasks, common = task_columns(rows)
    avg_name = _avg_name(tasks, common)
    columns: list[tuple[str, list[float | None]]] = [(t, [scores.get(t) for _, _, scores in rows]) for t in tasks]
    if common:
        columns.append((AVG, [_mean([scores[t] for t in common]) for _, _, scores in rows]))
    cells = [[_fmt(v) + m for v, m in zip(values, marks(c, values, differences), strict=True)]
             for c, values in columns]
    head = ["run", "stage", *tasks, *([avg_name] if avg_name else [])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, (label, stage, _) in enumerate(rows):
        lines.append("| " + " | ".join([label, stage, *(column[i] for column in cells)]) + " |")
    marked = any(SAME in cell for column in cells for cell in column)
    table = "\n".join(lines + (["", LEGEND] if marked else [])) + "\n"
    return table + _differences_section(rows, [c for c, _ in columns], avg_name, differences)


def _differences_section(rows: list[Row], columns: list[str], avg_name: str | None,
                         differences: RowDifferences | None) -> str:
    """Every row minus the first row, per column, where at least one of them has a paired difference."""
    if differences is None or len(rows) < 2:
        return ""
    diffs = [(f"{label} ({stage})", {c: differences.difference(c, i, 0) for c in columns})
             for i, (label, stage, _) in enumerate(rows) if i > 0]
    if not any(d is not None for _, cells in diffs for d in cells.values()):
        return ""
    named = [avg_name if c == AVG and avg_name else c for c in columns]
    renamed = [(label, {n: cells[c] for c, n in zip(columns, named, strict=True)}) for label, cells in diffs]
    return "\nPaired differences to the first row:\n\n" + differences_table(f"{rows[0][0]} ({rows[0][1]})", named,
                                                                             renamed)


def chart_rows(rows: list[Row]) -> list[Row]:
    """``sts.score_chart`` rows: each row's tasks plus the table's average column (none of one task: that task)."""
    tasks, common = task_columns(rows)
    name = _avg_name(tasks, common) if len(common) > 1 else None
    return [(label, stage, {**scores, **({name: _mean([scores[t] for t in common])} if name else {})})
            for label, stage, scores in rows]


def chart_spreads(runs: list[RunRows]) -> list[Intervals]:
    """Each row's error bars: a seed group's mean +- std (not a bootstrap interval: the paired differences compare)."""
    return [(run.intervals.get(stage, {}) if run.seeds else {}) for run in runs for stage, _ in run.rows]


def compare(run_dirs: list[str], out_dir: str | Path, samples: int = 1000, seed: int = 0) -> dict[str, Path]:
    if not run_dirs:
        raise DataError("no run directories given")
    runs = [run for d in run_dirs for run in read_run(d)]
    rows = flatten(runs)
    tasks, common = task_columns(rows)
    out = Path(out_dir)
    paths = {"markdown": out / "comparison.md", "png": out / "comparison.png"}
    table = markdown_table(rows, row_differences(runs, tasks, common, samples, seed))
    # a seed group's "avg" +- std is drawn only under the "avg" panel, which exists when it covers all its tasks
    save_chart(chart_rows(rows), paths["png"], spreads=chart_spreads(runs))
    atomic_write(paths["markdown"], table.encode())
    print(table, end="")
    print(f"wrote {paths['markdown']} and {paths['png']}")
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sts_lightning.runs.compare_runs", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="training (outputs/train/<time>) or evaluate run directories")
    parser.add_argument("--out", default="outputs/compare", help="where comparison.md / .png go (default: %(default)s)")
    parser.add_argument("--samples", type=int, default=1000,
                        help="paired bootstrap resamples (0: no paired differences but the seeds'; default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="the resamples' seed (default: %(default)s)")
    args = parser.parse_args(argv)
    run_or_exit(compare, args.runs, args.out, args.samples, args.seed)


if __name__ == "__main__":
    main()
