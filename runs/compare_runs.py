"""Compare finished runs offline: ``python -m runs.compare_runs <run dir> [<run dir> ...] --out <dir>``.

The dashboard for people without a W&B server: any mix of training run directories (before / after
training) and evaluate run directories (one row per encoder / scorer) becomes one markdown table and one
PNG bar chart of STS Spearman x100, written to ``--out`` and printed. Reading is ``runs.run_results``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from embeddings.errors import DataError, run_or_exit
from embeddings.io.atomic import atomic_file, atomic_write
from runs.run_results import RunRows, read_run

Row = tuple[str, str, dict[str, float]]  # (run label, stage, {task: Spearman x100})


def flatten(runs: list[RunRows]) -> list[Row]:
    """One row per (run, stage); a label two runs share gets the run directory's name appended."""
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.label] = counts.get(run.label, 0) + 1
    return [(run.label if counts[run.label] == 1 else f"{run.label} ({run.run_dir.name})", stage, scores)
            for run in runs for stage, scores in run.rows]


def task_columns(rows: list[Row]) -> tuple[list[str], list[str]]:
    """All tasks in first-seen order, and those every row has (the only fair average across rows)."""
    tasks = list(dict.fromkeys(t for _, _, scores in rows for t in scores))
    common = [t for t in tasks if all(t in scores for _, _, scores in rows)]
    return tasks, common


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values and not any(math.isnan(v) for v in values) else math.nan


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"  # the run did not score this task
    return "n/a" if math.isnan(value) else f"{value:.2f}"


def markdown_table(rows: list[Row]) -> str:
    """run | stage | one column per task | avg (over the tasks every row has; named when that is not all)."""
    tasks, common = task_columns(rows)
    avg_head = [] if not common else ["avg"] if common == tasks else [f"avg ({', '.join(common)})"]
    head = ["run", "stage", *tasks, *avg_head]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, stage, scores in rows:
        cells = [label, stage, *(_fmt(scores.get(t)) for t in tasks)]
        if common:
            cells.append(_fmt(_mean([scores[t] for t in common])))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def bar_chart(rows: list[Row], path: Path) -> None:
    """One bar group per task (plus the common average), one bar per row; "before" bars are hatched, paler."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks, common = task_columns(rows)
    groups = tasks + (["avg"] if common else [])
    labels = list(dict.fromkeys(label for label, _, _ in rows))
    colours = {label: plt.cm.tab10(i % 10) for i, label in enumerate(labels)}
    width = 0.8 / len(rows)
    fig, ax = plt.subplots(figsize=(max(7.0, 1.2 * len(groups) * max(1, len(rows) / 3) + 3), 4.2))
    values = []
    for i, (label, stage, scores) in enumerate(rows):
        ys = [scores.get(t, math.nan) for t in tasks] + ([_mean([scores[t] for t in common])] if common else [])
        values += [y for y in ys if not math.isnan(y)]
        xs = [g - 0.4 + (i + 0.5) * width for g in range(len(groups))]
        before = stage == "before"
        ax.bar(xs, [0.0 if math.isnan(y) else y for y in ys], width, color=colours[label],
               alpha=0.45 if before else 1.0, hatch="//" if before else None, edgecolor="white",
               label=f"{label} [{stage}]")
    low = min(values, default=0.0)
    ax.set_ylim(low - 5 if low < 0 else max(0.0, low - 5), max(100.0, max(values, default=0.0)))
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel("Spearman x100")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title("STS Spearman x100 (hatched: before training)")
    fig.tight_layout()
    with atomic_file(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


def compare(run_dirs: list[str], out_dir: str | Path) -> dict[str, Path]:
    """Read every run, write ``comparison.md`` and ``comparison.png`` to ``out_dir``, print the table."""
    if not run_dirs:
        raise DataError("no run directories given")
    rows = flatten([run for d in run_dirs for run in read_run(d)])
    out = Path(out_dir)
    paths = {"markdown": out / "comparison.md", "png": out / "comparison.png"}
    table = markdown_table(rows)
    atomic_write(paths["markdown"], table.encode())
    bar_chart(rows, paths["png"])
    print(table, end="")
    print(f"wrote {paths['markdown']} and {paths['png']}")
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m runs.compare_runs", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="training (outputs/train/<time>) or evaluate run directories")
    parser.add_argument("--out", default="outputs/compare", help="where comparison.md / .png go (default: %(default)s)")
    args = parser.parse_args(argv)
    run_or_exit(compare, args.runs, args.out)


if __name__ == "__main__":
    main()
