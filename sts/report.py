"""Results tables and charts: JSON of every number, a markdown table, a PNG bar chart.

Files are written atomically (temp file + rename) so an interrupted run never leaves a half
table that looks complete.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from embeddings.io.atomic import atomic_file, atomic_write
from sts.scoring import main_score
from sts.tasks import STANDARD_TASKS


def rows_of(results: list[dict]) -> list[tuple[str, dict[str, float]]]:
    """(row label, {task: main Spearman}) for every (encoder, scorer) result entry."""
    return [(f"{r['encoder']} / {r['scorer']}", {t: main_score(v) for t, v in r["tasks"].items()}) for r in results]


def _fmt(x: float) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:.2f}"


def markdown_table(results: list[dict]) -> str:
    """Spearman x100 ('all' aggregate) per task, an average column, and the 7-task average if complete."""
    tasks = list(results[0]["tasks"]) if results else []
    has_standard = all(t in tasks for t in STANDARD_TASKS)
    head = ["encoder / scorer", *tasks, "avg"] + (["avg (7 standard)"] if has_standard else []) + ["time (s)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r, (label, scores) in zip(results, rows_of(results), strict=True):
        vals = [scores[t] for t in tasks]
        cells = [label, *(_fmt(v) for v in vals), _fmt(sum(vals) / len(vals))]
        if has_standard:
            cells.append(_fmt(sum(scores[t] for t in STANDARD_TASKS) / len(STANDARD_TASKS)))
        cells.append(f"{r.get('seconds', float('nan')):.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def bar_chart(results: list[dict], path: Path, title: str = "STS Spearman x100") -> None:
    """One panel per encoder; in each, one bar group per task and one colour per scorer.

    Why panels: a single axis with every (encoder, scorer) pair repeats colours and hides bars
    behind the legend once a comparison has more than a handful of rows.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    tasks = list(results[0]["tasks"])
    encoders = list(dict.fromkeys(r["encoder"] for r in results))
    scorers = list(dict.fromkeys(r["scorer"] for r in results))
    colours = {s: plt.cm.tab10(i % 10) for i, s in enumerate(scorers)}
    width = 0.8 / max(len(scorers), 1)
    fig, axes = plt.subplots(len(encoders), 1, figsize=(max(7, 1.9 * len(tasks) + 3), 2.6 * len(encoders) + 0.6),
                             squeeze=False, sharex=True)
    x = np.arange(len(tasks))
    values = [main_score(v) for r in results for v in r["tasks"].values()]
    low = max(0.0, min((v for v in values if not math.isnan(v)), default=0.0) - 5)
    for ax, enc in zip(axes[:, 0], encoders, strict=True):
        for r in (r for r in results if r["encoder"] == enc):
            i = scorers.index(r["scorer"])
            ys = [main_score(r["tasks"][t]) for t in tasks]
            ax.bar(x + i * width - 0.4 + width / 2, [0 if math.isnan(y) else y for y in ys], width,
                   color=colours[r["scorer"]], label=r["scorer"])
        ax.set_title(enc, fontsize=9, loc="left")
        ax.set_ylim(low, 100)
        ax.set_ylabel("Spearman")
        ax.grid(axis="y", alpha=0.3)
    axes[-1, 0].set_xticks(x, tasks)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[s]) for s in scorers]
    fig.legend(handles, scorers, loc="center right", fontsize=8, frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 0.84, 1))
    with atomic_file(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


def write_reports(results: list[dict], out_dir: Path, meta: dict | None = None) -> dict[str, Path]:
    """results.json, results.md, results.png in ``out_dir``; returns their paths."""
    out_dir = Path(out_dir)
    paths = {"json": out_dir / "results.json", "markdown": out_dir / "results.md", "png": out_dir / "results.png"}
    payload = {"meta": meta or {}, "results": results}
    atomic_write(paths["json"], json.dumps(payload, indent=2, allow_nan=True).encode())
    atomic_write(paths["markdown"], markdown_table(results).encode())
    if results:
        bar_chart(results, paths["png"])
    return paths
