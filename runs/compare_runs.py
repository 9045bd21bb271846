"""Compare finished runs offline: ``python -m sts_lightning.runs.compare_runs <run dir> [<run dir> ...] --out <dir>``.

The dashboard for people without a W&B server: any mix of training run directories (before / after
training) and evaluate run directories (one row per encoder / scorer) becomes one markdown table and one
PNG dot chart of STS Spearman x100 (``sts.score_chart`` says why dots), written to ``--out`` and printed.
Tasks come in the papers' order (``sts.task_order``), the average last. Reading is ``runs.run_results``.

Where a row carries intervals (an evaluate run's bootstrap 95% CI, a seed group's mean +- std), a cell whose
difference to its column's best falls inside the intervals -- its value inside the best's interval, or the best's
inside its own -- is marked ``~``: the data do not tell the two apart. Without intervals on either side, no mark.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from sts_lightning.embeddings.errors import DataError, run_or_exit
from sts_lightning.embeddings.io.atomic import atomic_write
from sts_lightning.runs.run_results import Interval, RunRows, read_run
from sts_lightning.sts.score_chart import save_chart
from sts_lightning.sts.task_order import ordered_tasks

Row = tuple[str, str, dict[str, float]]  # (run label, stage, {task: Spearman x100})
Intervals = dict[str, Interval]  # one row's {task (or "avg"): (lo, hi)}
SAME = "~"
LEGEND = (f"{SAME}: the difference to the column's best is inside the intervals (its bootstrap 95% CI for an "
          "evaluate run, mean ± std for a seed group): not a difference these data resolve")


def flatten(runs: list[RunRows]) -> list[Row]:
    """One row per (run, stage); a label two runs share gets the run directory's name appended."""
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.label] = counts.get(run.label, 0) + 1
    return [(run.label if counts[run.label] == 1 else f"{run.label} ({run.run_dir.name})", stage, scores)
            for run in runs for stage, scores in run.rows]


def row_intervals(runs: list[RunRows]) -> list[Intervals]:
    """Each row's intervals, in ``flatten``'s order."""
    return [run.intervals.get(stage, {}) for run in runs for stage, _ in run.rows]


def within(value: float, best: float, mine: Interval | None, theirs: Interval | None) -> bool:
    """Whether ``value`` and the column's ``best`` cannot be told apart: either lies inside the other's interval."""
    return ((theirs is not None and theirs[0] <= value <= theirs[1])
            or (mine is not None and mine[0] <= best <= mine[1]))


def marks(values: list[float | None], intervals: list[Interval | None]) -> list[str]:
    """``~`` for each cell of a column inside the intervals of the column's best, else ``""``."""
    finite = [i for i, v in enumerate(values) if v is not None and not math.isnan(v)]
    if len(finite) < 2:
        return [""] * len(values)
    best = max(finite, key=lambda i: values[i])  # type: ignore[arg-type, return-value]
    return [SAME if i in finite and i != best and within(values[i], values[best], intervals[i], intervals[best])
            else "" for i in range(len(values))]  # type: ignore[arg-type]


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


def markdown_table(rows: list[Row], intervals: list[Intervals] | None = None) -> str:
    """run | stage | one column per task | avg (over the tasks every row has; named when that is not all); cells
    inside the intervals of their column's best marked ``~`` (module docstring), with a legend line."""
    tasks, common = task_columns(rows)
    avg_name = _avg_name(tasks, common)
    intervals = intervals or [{} for _ in rows]
    columns: list[tuple[str, list[float | None], list[Interval | None]]] = [
        (t, [scores.get(t) for _, _, scores in rows], [iv.get(t) for iv in intervals]) for t in tasks]
    if common:  # the seeds' own average interval holds only for an average over all of the table's tasks
        columns.append(("avg", [_mean([scores[t] for t in common]) for _, _, scores in rows],
                        [iv.get("avg") if avg_name == "avg" else None for iv in intervals]))
    cells = [[_fmt(v) + m for v, m in zip(values, marks(values, ivs), strict=True)] for _, values, ivs in columns]
    head = ["run", "stage", *tasks, *([avg_name] if avg_name else [])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, (label, stage, _) in enumerate(rows):
        lines.append("| " + " | ".join([label, stage, *(column[i] for column in cells)]) + " |")
    marked = any(SAME in cell for column in cells for cell in column)
    return "\n".join(lines + (["", LEGEND] if marked else [])) + "\n"


def chart_rows(rows: list[Row]) -> list[Row]:
    """``sts.score_chart`` rows: each row's tasks plus the table's average column, under the table's name.

    An average of one common task is that task again: no panel for it.
    """
    tasks, common = task_columns(rows)
    name = _avg_name(tasks, common) if len(common) > 1 else None
    return [(label, stage, {**scores, **({name: _mean([scores[t] for t in common])} if name else {})})
            for label, stage, scores in rows]


def compare(run_dirs: list[str], out_dir: str | Path) -> dict[str, Path]:
    """Read every run, write ``comparison.md`` and ``comparison.png`` to ``out_dir``, print the table."""
    if not run_dirs:
        raise DataError("no run directories given")
    runs = [run for d in run_dirs for run in read_run(d)]
    rows = flatten(runs)
    out = Path(out_dir)
    paths = {"markdown": out / "comparison.md", "png": out / "comparison.png"}
    table = markdown_table(rows, row_intervals(runs))
    atomic_write(paths["markdown"], table.encode())
    save_chart(chart_rows(rows), paths["png"])
    print(table, end="")
    print(f"wrote {paths['markdown']} and {paths['png']}")
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sts_lightning.runs.compare_runs", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="training (outputs/train/<time>) or evaluate run directories")
    parser.add_argument("--out", default="outputs/compare", help="where comparison.md / .png go (default: %(default)s)")
    args = parser.parse_args(argv)
    run_or_exit(compare, args.runs, args.out)


if __name__ == "__main__":
    main()
