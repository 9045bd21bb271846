"""The STS comparison chart: one small dot plot per task, one row per run, every value written beside its dot.

Dots, not bars: a bar must start at 0, where one point between two methods is invisible. Each panel spans its own
range (at least ``MIN_SPAN``); tasks are panels wrapped at ``MAX_COLS``; "before" (hollow) and "after" (filled)
share a row; a seed group's mean has its std as an error bar. Two rows of one label and stage are refused.
"""

from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.io.atomic import atomic_file
from sts_lightning.sts.task_order import is_average, ordered_tasks

Row = tuple[str, str, dict[str, float]]  # (run label, stage: before / after[ (...)] / eval, {task: Spearman x100})
Spread = dict[str, tuple[float, float]]  # one row's {task: (lo, hi)} drawn as an error bar (a seed group's +- std)

MIN_SPAN = 4.0  # points: a panel never zooms in further, so 0.1-point noise stays small
PAD_FRACTION = 0.18  # room on each side for the value written over the outermost dots
MAX_COLS = 4
PANEL_WIDTH_IN = 2.2
ROW_HEIGHT_IN = 0.34
LABEL_CHARS = 34  # a longer run label wraps onto two lines (at "/" or " ")
MAX_WIDTH_IN = 13.0
MAX_HEIGHT_IN = 18.0
DPI = 120
STAGE_STYLE = {  # marker face, edge, size; "before" is hollow so "after" stays the eye-catcher
    "before": {"facecolor": "white", "edgecolor": "0.45", "label": "before training"},
    "after": {"facecolor": "tab:blue", "edgecolor": "tab:blue", "label": "after training"},
    "eval": {"facecolor": "tab:orange", "edgecolor": "tab:orange", "label": "evaluated (evaluate.py)"},
}


def style_of(stage: str) -> str:
    """``before``, ``after`` (also ``after (mean of 3 seeds)``: a training result) or ``eval``."""
    return "before" if stage == "before" else "after" if stage.startswith("after") else "eval"


@dataclass(frozen=True)
class Point:
    """One drawn value: a dot (or "n/a" for NaN) in a panel's row, with its error bar where the row has one."""

    group: str
    label: str
    stage: str
    value: float
    spread: tuple[float, float] | None = None


def numbered(labels: list[str]) -> list[str]:
    """``labels`` with a repeated one numbered (``x #1``, ``x #2``), so that each is its own row and dot."""
    counts = {lb: labels.count(lb) for lb in labels}
    seen: dict[str, int] = {}
    out = []
    for lb in labels:
        seen[lb] = seen.get(lb, 0) + 1
        out.append(lb if counts[lb] == 1 else f"{lb} #{seen[lb]}")
    return out


def check_rows(rows: list[Row]) -> None:
    """One ``DataError`` line when two rows share a label and stage: one of their dots would hide the other."""
    seen: set[tuple[str, str]] = set()
    for label, stage, _ in rows:
        if (label, stage) in seen:
            raise DataError(f"two chart rows are both {label!r} ({stage}): one dot would hide the other; "
                            "give the rows distinct labels")
        seen.add((label, stage))


def panel_points(group: str, rows: list[Row], spreads: list[Spread] | None = None) -> list[Point]:
    """Every value of ``group`` to draw, one per row that has it (what a panel shows, what tests count)."""
    spreads = spreads or [{} for _ in rows]
    return [Point(group, label, stage, scores[group], spread.get(group))
            for (label, stage, scores), spread in zip(rows, spreads, strict=True) if group in scores]


@dataclass(frozen=True)
class ChartLayout:
    """Every decision about the figure, computed from the numbers alone (what the tests check)."""

    groups: list[str]  # panels, in task order, averages last
    labels: list[str]  # y rows, top to bottom (shown wrapped: ``wrap_label``)
    limits: dict[str, tuple[float, float]]  # x range of each panel
    ncols: int
    nrows: int
    figsize: tuple[float, float]  # inches


def panel_limits(values: list[float]) -> tuple[float, float]:
    """The x range of one task's panel: its values plus padding, at least ``MIN_SPAN`` wide, never from 0."""
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return (0.0, 100.0)
    low, high = min(finite), max(finite)
    span = max(high - low, MIN_SPAN)
    middle = (low + high) / 2
    half = span / 2 * (1 + 2 * PAD_FRACTION)
    return (middle - half, middle + half)


def wrap_label(label: str) -> str:
    """At most two lines of ``LABEL_CHARS``, broken after a ``/`` or a space; longer labels keep both ends."""
    n = LABEL_CHARS
    if len(label) <= n:
        return label
    lines = [""]
    for piece in re.findall(r"[^/ ]+[/ ]*|[/ ]+", label):
        if lines[-1] and len(lines[-1]) + len(piece) > n:
            lines.append("")
        lines[-1] += piece
    lines = [chunk.strip() for line in lines for chunk in (line[i:i + n] for i in range(0, len(line), n))]
    if len(lines) > 2:
        lines = [lines[0], "\u2026" + label[-(n - 1):].strip()]
    return "\n".join(line for line in lines if line)


def chart_layout(rows: list[Row], spreads: list[Spread] | None = None) -> ChartLayout:
    """Panels, rows, per-panel ranges and a figure size capped at ``MAX_WIDTH_IN`` x ``MAX_HEIGHT_IN``."""
    groups = ordered_tasks(t for _, _, scores in rows for t in scores)
    labels = list(dict.fromkeys(label for label, _, _ in rows))
    limits = {g: panel_limits([v for p in panel_points(g, rows, spreads) for v in (p.value, *(p.spread or ()))])
              for g in groups}  # an error bar stays inside its panel
    nrows = max(1, math.ceil(len(groups) / MAX_COLS))
    ncols = max(1, math.ceil(len(groups) / nrows))  # balanced: 5 panels are 3 + 2, not 4 + 1
    shown = [wrap_label(label) for label in labels]
    label_in = 0.3 + 0.062 * max((len(line) for lb in shown for line in lb.split("\n")), default=4)
    width = min(MAX_WIDTH_IN, label_in + ncols * PANEL_WIDTH_IN + 0.3)
    two_line = any("\n" in lb for lb in shown)
    height = min(MAX_HEIGHT_IN, nrows * (len(labels) * ROW_HEIGHT_IN * (1.25 if two_line else 1) + 0.95) + 1.1)
    return ChartLayout(groups, labels, limits, ncols, nrows, (round(width, 2), round(height, 2)))


def _draw_panel(ax, group: str, layout: ChartLayout, rows: list[Row], spreads: list[Spread] | None = None) -> None:
    """One task: a dot per (run, stage), before joined to after, each value written over (after) or under its dot."""
    y_of = {label: len(layout.labels) - 1 - i for i, label in enumerate(layout.labels)}  # first run on top
    points = panel_points(group, rows, spreads)
    low, high = layout.limits[group]
    by_label: dict[str, dict[str, float]] = {}
    for p in points:
        by_label.setdefault(p.label, {})[style_of(p.stage)] = p.value
    for label, stages in by_label.items():
        if "before" in stages and "after" in stages and not any(map(math.isnan, stages.values())):
            ax.plot([stages["before"], stages["after"]], [y_of[label]] * 2, color="0.6", lw=1.2, zorder=1)
    for p in points:
        y, value = y_of[p.label], p.value
        if math.isnan(value):
            ax.text((low + high) / 2, y, "n/a", ha="center", va="center", fontsize=7, color="0.4", style="italic")
            continue
        style = STAGE_STYLE[style_of(p.stage)]
        if p.spread is not None:
            ax.errorbar([value], [y], xerr=[[value - p.spread[0]], [p.spread[1] - value]], fmt="none",
                        ecolor=style["edgecolor"], elinewidth=1.2, capsize=3, zorder=2)
        ax.scatter([value], [y], s=34, zorder=3, facecolors=style["facecolor"], edgecolors=style["edgecolor"],
                   linewidths=1.2)
        above = p.stage != "before"
        ax.annotate(f"{value:.2f}", (value, y), xytext=(0, 4 if above else -4), textcoords="offset points",
                    ha="center", va="bottom" if above else "top", fontsize=6.5, color="black" if above else "0.4")
    ax.set_xlim(low, high)
    ax.set_ylim(-0.7, len(layout.labels) - 0.3)
    ax.set_title(textwrap.fill(group, 30), fontsize=9, fontweight="bold" if is_average(group) else "normal")
    ax.set_xlabel("Spearman x100, axis not from 0", fontsize=7, color="0.35")
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(axis="x", alpha=0.3)
    ax.grid(axis="y", alpha=0.15)
    if is_average(group):
        ax.set_facecolor("0.96")


def draw(rows: list[Row], title: str = "STS Spearman x100", spreads: list[Spread] | None = None):
    """The chart as a matplotlib Figure (Agg), ``spreads`` each row's error bars; the caller saves it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    check_rows(rows)
    layout = chart_layout(rows, spreads)
    fig, axes = plt.subplots(layout.nrows, layout.ncols, figsize=layout.figsize, sharey=True, squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= len(layout.groups):
            ax.set_visible(False)
            continue
        _draw_panel(ax, layout.groups[i], layout, rows, spreads)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]))
    for ax in axes[:, 0]:
        ax.set_yticks(range(len(layout.labels)), [wrap_label(lb) for lb in reversed(layout.labels)], fontsize=8)
    stages = [s for s in STAGE_STYLE if any(style_of(stage) == s for _, stage, _ in rows)]
    seeds = " (seeds: mean ± std)" if any(spreads or []) else ""
    handles = [] if len(stages) < 2 else [  # one kind of marker needs no key
        Line2D([], [], ls="", marker="o", markersize=6, markerfacecolor=STAGE_STYLE[s]["facecolor"],
               markeredgecolor=STAGE_STYLE[s]["edgecolor"], label=STAGE_STYLE[s]["label"] + (seeds if s == "after" else ""))
        for s in stages]
    heading = f"{title}  (each panel zooms to its task: read the numbers, compare within a panel)"
    fig.suptitle(textwrap.fill(heading, max(30, int(layout.figsize[0] * 12))), fontsize=10)  # one panel: 2 lines
    bottom = 0.45 / layout.figsize[1] if handles else 0.0
    if handles:
        fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return fig


def save_chart(rows: list[Row], path: Path, title: str = "STS Spearman x100",
               spreads: list[Spread] | None = None) -> None:
    """``draw`` to a PNG, written atomically (an interrupted run never leaves half a picture)."""
    import matplotlib.pyplot as plt

    fig = draw(rows, title, spreads)
    with atomic_file(path) as tmp:
        fig.savefig(tmp, dpi=DPI, format="png")
    plt.close(fig)
