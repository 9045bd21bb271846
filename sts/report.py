"""Results tables and charts: JSON of every number, a markdown table, a PNG chart; written atomically."""

from __future__ import annotations

import json
import math
from pathlib import Path

from sts_lightning.embeddings.io.atomic import atomic_write
from sts_lightning.sts.paired import AVG, differences_table
from sts_lightning.sts.predictions import RunPredictions
from sts_lightning.sts.score_chart import numbered, save_chart
from sts_lightning.sts.scoring import main_score
from sts_lightning.sts.task_order import ordered_tasks
from sts_lightning.sts.tasks import STANDARD_TASKS


def rows_of(results: list[dict]) -> list[tuple[str, dict[str, float]]]:
    """(row label, {task: main Spearman}) for every (encoder, scorer) result entry."""
    return [(f"{r['encoder']} / {r['scorer']}", {t: main_score(v) for t, v in r["tasks"].items()}) for r in results]


def _fmt(x: float) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:.2f}"


CI_LEGEND = ("[lo, hi]: bootstrap 95% confidence interval of the Spearman (the task's pairs resampled with "
             "replacement; evaluate.py bootstrap.samples=0 leaves it out)")


def interval_of(task_result: dict) -> list[float] | None:
    """The main aggregate's bootstrap interval [lo, hi] (``sts.scoring``), None when the run computed none."""
    ci = task_result.get("all", {}).get("spearman_ci")
    return None if ci is None or any(math.isnan(v) for v in ci) else [float(v) for v in ci]


def _with_ci(value: float, ci: list[float] | None) -> str:
    return _fmt(value) if ci is None else f"{_fmt(value)} [{ci[0]:.2f}, {ci[1]:.2f}]"


def paired_section(results: list[dict], predictions: RunPredictions | None) -> str:
    """Every scored row minus the first, per task and average (``sts.paired``); empty without two such rows."""
    paired = predictions.paired() if predictions is not None else None
    if paired is None:
        return ""
    indices, table = paired
    labels = [label for label, _ in rows_of(results)]
    columns = [*ordered_tasks(table.tasks), *([AVG] if AVG in table.point else [])]
    rows = [(labels[i], {c: table.difference(c, k, 0) for c in columns}) for k, i in enumerate(indices) if k > 0]
    return "\nPaired differences to the first row:\n\n" + differences_table(labels[indices[0]], columns, rows)


def markdown_table(results: list[dict], predictions: RunPredictions | None = None) -> str:
    """Spearman x100 per task (with intervals), averages and time; with ``predictions``, the paired differences."""
    tasks = ordered_tasks(results[0]["tasks"]) if results else []
    has_standard = all(t in tasks for t in STANDARD_TASKS)
    rates = any("rate" in r for r in results)  # what a row costs: sentences / s, or pairs / s for a pair scorer
    head = ["encoder / scorer", *tasks, "avg"] + (["avg (7 standard)"] if has_standard else []) + ["time (s)"] + \
        (["speed"] if rates else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    any_ci = False
    for r, (label, scores) in zip(results, rows_of(results), strict=True):
        vals = [scores[t] for t in tasks]
        cis = [interval_of(r["tasks"][t]) for t in tasks]
        any_ci = any_ci or any(ci is not None for ci in cis)
        cells = [label, *(_with_ci(v, ci) for v, ci in zip(vals, cis, strict=True)), _fmt(sum(vals) / len(vals))]
        if has_standard:
            cells.append(_fmt(sum(scores[t] for t in STANDARD_TASKS) / len(STANDARD_TASKS)))
        cells.append(f"{r.get('seconds', float('nan')):.1f}")
        if rates:
            rate = r.get("rate")
            cells.append(f"{rate['per_s']:,.0f} {rate['unit']}/s" if rate else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + (["", CI_LEGEND] if any_ci else [])) + "\n" + paired_section(results, predictions)


def chart_rows(results: list[dict]) -> list[tuple[str, str, dict[str, float]]]:
    """``sts.score_chart`` rows, one per (encoder, scorer), with ``avg`` from two tasks up."""
    rows = []
    labelled = rows_of(results)
    for label, (_, scores) in zip(numbered([lb for lb, _ in labelled]), labelled, strict=True):  # encoders=[a,a]
        values = list(scores.values())
        rows.append((label, "eval", {**scores, **({"avg": sum(values) / len(values)} if len(values) > 1 else {})}))
    return rows


def write_reports(results: list[dict], out_dir: Path, meta: dict | None = None,
                  predictions: RunPredictions | None = None) -> dict[str, Path]:
    """results.json, results.md, results.png (and ``predictions.npz``) in ``out_dir``; returns their paths."""
    out_dir = Path(out_dir)
    paths = {"json": out_dir / "results.json", "markdown": out_dir / "results.md", "png": out_dir / "results.png"}
    if predictions is not None:  # before results.json: a reader that finds the results finds their similarities
        paths["predictions"] = predictions.write(out_dir)
    payload = {"meta": meta or {}, "results": results}
    atomic_write(paths["json"], json.dumps(payload, indent=2, allow_nan=True).encode())
    atomic_write(paths["markdown"], markdown_table(results, predictions).encode())
    if results:
        save_chart(chart_rows(results), paths["png"])
    return paths
