"""Chained training stages from one config (SED's NLI -> CT -> SED -> Flow): ``experiment=pipeline/ct_sed_flow``.

Each stage is an ordinary ``train`` config composed from its overrides, run once per seed into
``<output_dir>/<stage>/seed<k>``; in an override, ``{name}`` is the export(s) of stage ``name`` and ``{name:each}``
the export of the same seed index. A finished stage-seed is skipped, so an interrupted pipeline resumes.
"""

from __future__ import annotations

import json
import logging
import re
import statistics
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.atomic import atomic_write
from sts_lightning.embeddings.io.package_files import CONFIG_DIR
from sts_lightning.embeddings.methods.meta.scorer import MeanEnsembleScorer
from sts_lightning.embeddings.methods.pooling import PoolingScorer
from sts_lightning.embeddings.sources.build import build_source
from sts_lightning.runs import train_run
from sts_lightning.runs.constructor_defaults import register as register_constructor_defaults
from sts_lightning.sts.scoring import main_score, score_tasks
from sts_lightning.sts.tasks import expand_groups, load_task

log = logging.getLogger(__name__)
PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_]+)(:each)?\}")


def substitute(override: str, exports: dict[str, list[str]], index: int) -> str:
    """Replace ``{stage}`` (one path, or ``[p1,p2,...]``) / ``{stage:each}`` in one override string."""

    def replace(match: re.Match) -> str:
        name, each = match.group(1), match.group(2)
        if name not in exports:
            raise ConfigError(f"pipeline override {override!r} names stage {name!r}, which has not run before it "
                              f"(earlier stages: {sorted(exports)})")
        paths = exports[name]
        if each:
            if index >= len(paths):
                raise ConfigError(f"{{{name}:each}}: stage {name!r} has {len(paths)} exports, this stage needs "
                                  f"seed index {index}")
            return paths[index]
        return paths[0] if len(paths) == 1 else "[" + ",".join(paths) + "]"

    return PLACEHOLDER.sub(replace, override)


def _compose(overrides: list[str]) -> DictConfig:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_constructor_defaults()  # the defaults the configs depart from (runs/constructor_defaults.py)
    if GlobalHydra.instance().is_initialized():
        return compose(config_name="train", overrides=overrides)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=overrides)


def _run_stage_seed(stage: DictConfig, seed: int, index: int, common: list[str], tasks: list[str],
                    exports: dict[str, list[str]], out: Path) -> dict[str, float]:
    metrics_file = out / "metrics.json"
    if metrics_file.is_file() and (out / "export").is_dir():
        log.info("pipeline: %s seed %d already done (%s)", stage.name, seed, out)
        return json.loads(metrics_file.read_text())
    overrides = [*common, *[substitute(str(o), exports, index) for o in stage.get("overrides", [])],
                 f"seed={seed}", "export=true", "ckpt_path=last", f"callbacks.sts_evaluation.tasks=[{','.join(tasks)}]"]
    log.info("pipeline: stage %s seed %d: %s", stage.name, seed, " ".join(overrides))
    cfg = _compose(overrides)
    with open_dict(cfg):
        cfg.output_dir = str(out)
    metrics = train_run.train(cfg)
    atomic_write(metrics_file, json.dumps(metrics, indent=1).encode())
    return metrics


def _summary(label: str, runs: list[dict[str, float]], tasks: list[str]) -> dict:
    """Per task mean / max / std over seeds, and each run's average over tasks (the paper's Table 3 unit)."""
    row: dict = {"stage": label, "runs": len(runs), "tasks": {},
                 "run_avgs": [statistics.fmean(r[f"val/{t}_spearman"] for t in tasks) for r in runs]}
    for task in tasks:
        values = [r[f"val/{task}_spearman"] for r in runs]
        row["tasks"][task] = {"mean": statistics.fmean(values), "max": max(values),
                              "std": statistics.stdev(values) if len(values) > 1 else 0.0}
    return row


def _score_row(label: str, scorer, tasks: list[str], data_dir) -> dict:
    scores = score_tasks(scorer, [load_task(t, data_dir) for t in tasks])
    return {"stage": label, "runs": 1, "tasks": {t: {"mean": main_score(v), "max": main_score(v), "std": 0.0}
                                                 for t, v in scores.items()}}


def pipeline_table(rows: list[dict], tasks: list[str]) -> str:
    lines = ["| stage | runs | " + " | ".join(tasks) + " | avg |", "|---" * (len(tasks) + 3) + "|"]
    for r in rows:
        cells = [f"{r['tasks'][t]['mean']:.2f}" + (f" ± {r['tasks'][t]['std']:.2f}" if r["runs"] > 1 else "")
                 for t in tasks]
        avg = statistics.fmean(r["tasks"][t]["mean"] for t in tasks)
        lines.append(f"| {r['stage']} | {r['runs']} | " + " | ".join(cells) + f" | {avg:.2f} |")
    lines += ["", "| stage | max | mean | std (over runs of the task average) |", "|---|---|---|---|"]
    for r in rows:
        avgs = r.get("run_avgs") or [statistics.fmean(r["tasks"][t]["mean"] for t in tasks)]
        std = statistics.stdev(avgs) if len(avgs) > 1 else 0.0
        lines.append(f"| {r['stage']} | {max(avgs):.2f} | {statistics.fmean(avgs):.2f} | {std:.2f} |")
    return "\n".join(lines)


def run_pipeline(cfg: DictConfig) -> dict[str, float]:
    """Run every stage x seed in order, write ``pipeline_sts.md`` / ``.json``; returns the last stage's means."""
    spec = cfg.pipeline
    if not spec.get("stages"):
        raise ConfigError("pipeline.stages is empty: list at least one stage {name, overrides, seeds}")
    root = Path(cfg.output_dir)
    tasks = expand_groups([str(t) for t in spec.get("tasks", ["stsb-dev"])])  # a group: its tasks, one column each
    data_dir = cfg.paths.data_dir
    common = [f"paths.data_dir={data_dir}", *[str(o) for o in spec.get("common", [])]]
    rows = []
    if spec.get("start"):
        encoder = load_encoder(str(spec.start))
        rows.append(_score_row(f"start: {spec.start}", PoolingScorer(encoder, spec.get("start_pooling", "mean")),
                               tasks, data_dir))
    exports: dict[str, list[str]] = {}
    last: dict[str, float] = {}
    for stage in spec.stages:
        if not stage.get("name") or stage.name in exports:
            raise ConfigError(f"every pipeline stage needs a unique name, got {stage.get('name')!r}")
        seeds = [int(s) for s in stage.get("seeds", [cfg.seed])]
        runs = [_run_stage_seed(stage, seed, i, common, tasks, exports, root / stage.name / f"seed{seed}")
                for i, seed in enumerate(seeds)]
        if stage.get("ensemble_of"):
            members = exports[str(stage.ensemble_of)]
            scorer = MeanEnsembleScorer([build_source(p) for p in members])
            rows.append(_score_row(f"{stage.ensemble_of}: full ensemble of {len(members)}", scorer, tasks, data_dir))
        exports[stage.name] = [str(root / stage.name / f"seed{s}" / "export") for s in seeds]
        rows.append(_summary(stage.name, runs, tasks))
        last = {k: statistics.fmean(r[k] for r in runs) for k in runs[0]}
    table = pipeline_table(rows, tasks)
    atomic_write(root / "pipeline_sts.md", (table + "\n").encode())
    atomic_write(root / "pipeline_sts.json", json.dumps({"rows": rows, "exports": exports,
                                                          "config": OmegaConf.to_container(spec)}, indent=1).encode())
    print(table)
    return last
