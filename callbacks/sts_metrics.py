"""The STS callback's metric names and the text made of them (the log line, the before / after table)."""

from __future__ import annotations

import numpy as np

from sts_lightning.sts.scoring import main_score

AVG_KEY = "val/sts_avg_spearman"


def flat_metrics(results: dict[str, dict]) -> dict[str, float]:
    """``val/<task>_spearman`` / ``_pearson`` (and geometry) of per-task aggregates, mean Spearman as ``AVG_KEY``."""
    metrics: dict[str, float] = {}
    for name, result in results.items():
        metrics[f"val/{name}_spearman"] = main_score(result, "spearman")
        metrics[f"val/{name}_pearson"] = main_score(result, "pearson")
        for key in ("alignment", "uniformity"):
            if key in result.get("geometry", {}):
                metrics[f"val/{name}_{key}"] = float(result["geometry"][key])
    metrics[AVG_KEY] = float(np.mean([main_score(r) for r in results.values()]))
    return metrics


def before_after_table(start: dict[str, float], last: dict[str, float]) -> str:
    """Markdown rows task | before | after | change for every ``val/<task>_spearman`` (and the average)."""
    keys = [k for k in last if k.startswith("val/") and k.endswith("_spearman") and k in start]
    rows = ["| task | before | after | change |", "|---|---|---|---|"]
    for key in keys:
        name = "average" if key == AVG_KEY else key[len("val/"):-len("_spearman")]
        rows.append(f"| {name} | {start[key]:.2f} | {last[key]:.2f} | {last[key] - start[key]:+.2f} |")
    return "\n".join(rows)


def spearman_line(metrics: dict[str, float]) -> str:
    """``stsb-dev 71.02, sts12 54.39, sts_avg 61.06``: every ``val/<task>_spearman`` of a metrics dict."""
    return ", ".join(f"{k[len('val/'):-len('_spearman')]} {float(v):.2f}" for k, v in metrics.items()
                     if k.startswith("val/") and k.endswith("_spearman"))
