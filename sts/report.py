"""Results tables and charts: JSON of every number, a markdown table, a PNG bar chart.

Files are written atomically (temp file + rename) so an interrupted run never leaves a half
table that looks complete.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from sts.scoring import main_score
from sts.tasks import STANDARD_TASKS


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


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
    """Grouped bars: one group per task, one bar per (encoder, scorer)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = rows_of(results)
    tasks = list(results[0]["tasks"])
    width = 0.8 / max(len(rows), 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(tasks) + 0.25 * len(rows)), 4.5))
    x = np.arange(len(tasks))
    for i, (label, scores) in enumerate(rows):
        ax.bar(x + i * width - 0.4 + width / 2, [scores[t] for t in tasks], width, label=label)
    ax.set_xticks(x, tasks)
    ax.set_ylabel("Spearman x100")
    lows = [v for _, s in rows for v in s.values() if not math.isnan(v)]
    ax.set_ylim(max(0, min(lows, default=0) - 10), 100)
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=max(1, len(rows) // 8), loc="lower right")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)


def write_reports(results: list[dict], out_dir: Path, meta: dict | None = None) -> dict[str, Path]:
    """results.json, results.md, results.png in ``out_dir``; returns their paths."""
    out_dir = Path(out_dir)
    paths = {"json": out_dir / "results.json", "markdown": out_dir / "results.md", "png": out_dir / "results.png"}
    payload = {"meta": meta or {}, "results": results}
    _atomic_write(paths["json"], json.dumps(payload, indent=2, allow_nan=True).encode())
    _atomic_write(paths["markdown"], markdown_table(results).encode())
    if results:
        bar_chart(results, paths["png"])
    return paths
