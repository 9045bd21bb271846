"""Compare finished runs offline: ``python -m sts_lightning.runs.compare_runs <run dir> [<run dir> ...] --out <dir>``.

The dashboard for people without a W&B server: any mix of training run directories (before / after
training) and evaluate run directories (one row per encoder / scorer) becomes one markdown table and one
PNG dot chart of STS Spearman x100 (``sts.score_chart`` says why dots), written to ``--out`` and printed.
Tasks come in the papers' order (``sts.task_order``), the average last. Reading is ``runs.run_results``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from sts_lightning.embeddings.errors import DataError, run_or_exit
from sts_lightning.embeddings.io.atomic import atomic_write
from sts_lightning.runs.run_results import RunRows, read_run
from sts_lightning.sts.score_chart import save_chart
from sts_lightning.sts.task_order import ordered_tasks

Row = tuple[str, str, dict[str, float]]  # (run label, stage, {task: Spearman x100})


def flatten(runs: list[RunRows]) -> list[Row]:
    """One row per (run, stage); a label two runs share gets the run directory's name appended."""
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.label] = counts.get(run.label, 0) + 1
    return [(run.label if counts[run.label] == 1 else f"{run.label} ({run.run_dir.name})", stage, scores)
            for run in runs for stage, scores in run.rows]


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


def markdown_table(rows: list[Row]) -> str:
    """run | stage | one column per task | avg (over the tasks every row has; named when that is not all)."""
    tasks, common = task_columns(rows)
    avg_name = _avg_name(tasks, common)
    head = ["run", "stage", *tasks, *([avg_name] if avg_name else [])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, stage, scores in rows:
        cells = [label, stage, *(_fmt(scores.get(t)) for t in tasks)]
        if common:
            cells.append(_fmt(_mean([scores[t] for t in common])))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


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
    rows = flatten([run for d in run_dirs for run in read_run(d)])
    out = Path(out_dir)
    paths = {"markdown": out / "comparison.md", "png": out / "comparison.png"}
    table = markdown_table(rows)
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
