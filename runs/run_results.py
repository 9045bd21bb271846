"""Read the STS results of a finished run directory into labelled rows, from files (no W&B server needed).

Evaluate runs: ``results.json``; seed groups: ``seeds_sts.json``; training runs: ``csv/metrics.csv``, else
``sts_before_after.md``, else the W&B run's final table. Labels come from ``.hydra/``, as W&B names the run.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from sts_lightning.embeddings.errors import DataError
from sts_lightning.runs.run_labels import backbone_names, method_name, short_name
from sts_lightning.runs.seed_table import AVG, task_scores

# sts.scoring.MAIN_AGGREGATE, not imported: sts.scoring pulls in torch, 4 s for a table tool.
MAIN_AGGREGATE = "all"
SEEDS_TABLE = "seeds_sts.json"  # runs.seed_runs.TABLE_JSON, not imported: runs.seed_runs pulls in torch
PREDICTIONS = "predictions.npz"  # sts.predictions.RunPredictions.FILE
TRAIN_PREDICTIONS = "sts_predictions"  # callbacks.sts_evaluation: <stage>.npz, system "pred"
Interval = tuple[float, float]


@dataclass
class RunRows:
    """One run directory's rows, ``(stage, {task: Spearman x100})``; per stage, ``intervals`` where known and the
    ``predictions`` file of its per-pair similarities; ``seeds``: a seed group's ``{seed: {task: x}}``."""

    run_dir: Path
    label: str
    rows: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    intervals: dict[str, dict[str, Interval]] = field(default_factory=dict)
    predictions: dict[str, tuple[Path, str]] = field(default_factory=dict)
    seeds: dict[str, dict[str, float]] = field(default_factory=dict)


def _csv_rows(path: Path) -> list[dict[str, float]]:
    """Every metrics.csv row that holds STS results, in order (the callback logs all tasks in one row)."""
    with path.open(newline="") as f:
        rows = [task_scores({k: v for k, v in row.items() if k and v not in (None, "")}) for row in csv.DictReader(f)]
    return [scores for scores in rows if scores]


def before_after_rows(path: Path) -> list[tuple[str, dict[str, float]]]:
    """``| task | before | after | change |`` rows of the STS callback's ``sts_before_after.md``."""
    before, after = {}, {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("task", "average") or set(cells[0]) <= {"-"}:
            continue
        try:
            before[cells[0]], after[cells[0]] = float(cells[1]), float(cells[2])
        except ValueError as err:
            raise DataError(f"{path}: cannot read the row {line.strip()!r} ({err})") from None
    return [("before", before), ("after", after)] if after else []


def _wandb_table(run_dir: Path) -> list[tuple[str, dict[str, float]]]:
    """The last final-STS table a W&B run (offline or online) saved in the run directory."""
    tables = sorted(run_dir.glob("wandb/*run-*/files/media/table/val/sts_final_*.table.json"),
                    key=lambda p: p.stat().st_mtime)
    if not tables:
        return []
    table = json.loads(tables[-1].read_text())
    task, spearman = table["columns"].index("task"), table["columns"].index("spearman")
    return [("after", {r[task]: math.nan if r[spearman] is None else float(r[spearman]) for r in table["data"]})]


def _train_label(run_dir: Path) -> str:
    """``experiment/method/backbone/seed<k>`` from the saved Hydra config; the directory's name without one."""
    config, hydra = run_dir / ".hydra" / "config.yaml", run_dir / ".hydra" / "hydra.yaml"
    if not config.is_file():
        return f"{run_dir.parent.name}/{run_dir.name}" if run_dir.parent.name else run_dir.name
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(config)
    experiment = OmegaConf.select(OmegaConf.load(hydra), "hydra.runtime.choices.experiment") \
        if hydra.is_file() else None
    model = cfg.get("model") or {}
    try:
        backbone = "+".join(backbone_names(model))
    except Exception:  # noqa: BLE001  (an interpolation into Hydra's runtime cannot resolve offline)
        backbone = ""
    seed = OmegaConf.select(cfg, "seed", default=None, throw_on_resolution_failure=False)
    seeds = OmegaConf.select(cfg, "seeds", default=None, throw_on_resolution_failure=False)
    seed_part = f"seeds{','.join(str(s) for s in seeds)}" if seeds else None if seed is None else f"seed{seed}"
    parts = [experiment, method_name(model), backbone, seed_part]
    return "/".join(str(p) for p in parts if p)


def read_train_run(run_dir: Path) -> RunRows:
    """Before (when the callback scored the start: ``eval_at_start``) and after rows of a training run."""
    rows: list[tuple[str, dict[str, float]]] = []
    metrics = run_dir / "csv" / "metrics.csv"
    before_after = run_dir / "sts_before_after.md"
    if metrics.is_file() and (scored := _csv_rows(metrics)):
        # sts_before_after.md exists only when the first scoring was the "before" one.
        rows = ([("before", scored[0])] if before_after.is_file() and len(scored) > 1 else []) + [("after", scored[-1])]
    elif before_after.is_file():
        rows = before_after_rows(before_after)
    else:
        rows = _wandb_table(run_dir)
    if not rows:
        raise DataError(f"{run_dir} has no STS results: no val/<task>_spearman in csv/metrics.csv, no "
                        "sts_before_after.md, no W&B sts_final table (was callbacks.sts_evaluation switched off?)")
    saved = {stage: (run_dir / TRAIN_PREDICTIONS / f"{stage}.npz", "pred") for stage, _ in rows
             if (run_dir / TRAIN_PREDICTIONS / f"{stage}.npz").is_file()}
    return RunRows(run_dir, _train_label(run_dir), rows, predictions=saved)


def read_seed_run(run_dir: Path) -> RunRows:
    """A ``seeds=[...]`` run directory: one row of the seeds' means, mean +- std as each task's interval."""
    path = run_dir / SEEDS_TABLE
    try:
        summary = json.loads(path.read_text())
        stage = f"after (mean of {len(summary['seeds'])} seeds)"
        columns = [*summary["tasks"], AVG]
        spread = {c: (summary["mean"][c] - summary["std"][c], summary["mean"][c] + summary["std"][c]) for c in columns}
        seeds = {str(s): {c: float(v) for c, v in row.items()} for s, row in summary["per_seed"].items()}
        return RunRows(run_dir, _train_label(run_dir), [(stage, {t: float(summary["mean"][t]) for t in summary["tasks"]})],
                       {stage: spread}, seeds=seeds)
    except (ValueError, KeyError, TypeError) as err:
        raise DataError(f"{path} is not a seeds table ({type(err).__name__}: {err})") from None


def _interval(scores: dict) -> Interval | None:
    ci = scores.get("spearman_ci")
    return None if ci is None or any(v is None or math.isnan(v) for v in ci) else (float(ci[0]), float(ci[1]))


def read_evaluate_run(run_dir: Path) -> list[RunRows]:
    """One entry per (encoder, scorer) of ``results.json``: the main Spearman and its bootstrap interval if any."""
    path = run_dir / "results.json"
    try:
        results = json.loads(path.read_text())["results"]
        out = []
        saved = run_dir / PREDICTIONS
        for i, r in enumerate(results):
            mains = {t: v[MAIN_AGGREGATE] for t, v in r["tasks"].items()}
            cis = {t: ci for t, v in mains.items() if (ci := _interval(v)) is not None}
            sims = {"eval": (saved, f"row{i}")} if saved.is_file() and "unsupported" not in r else {}
            out.append(RunRows(run_dir, f"{short_name(r['encoder'])} / {r['scorer']}",
                               [("eval", {t: float(v["spearman"]) for t, v in mains.items()})], {"eval": cis}, sims))
        return out
    except (ValueError, KeyError, TypeError) as err:
        raise DataError(f"{path} is not an evaluate results file ({type(err).__name__}: {err})") from None


def read_run(path: str | Path) -> list[RunRows]:
    """The rows of any run directory: ``results.json`` makes it an evaluate run, the training files a training run."""
    run_dir = Path(path)
    if not run_dir.is_dir():
        raise DataError(f"{run_dir} is not a directory")
    if (run_dir / SEEDS_TABLE).is_file():
        return [read_seed_run(run_dir)]
    if (run_dir / "results.json").is_file():
        runs = read_evaluate_run(run_dir)
        if not runs:
            raise DataError(f"{run_dir}/results.json has no results")
        return runs
    markers = (".hydra/config.yaml", "csv/metrics.csv", "sts_before_after.md")
    if any((run_dir / m).is_file() for m in markers) or any(run_dir.glob("wandb/*run-*")):
        return [read_train_run(run_dir)]
    raise DataError(f"{run_dir} is not a run directory: no results.json (evaluate.py) and no "
                    f"{', '.join(markers)} or wandb/ (train.py)")
