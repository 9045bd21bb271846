"""The table of a ``seeds=[...]`` run: each seed's final Spearman per task, and mean +- sample std over the seeds.

Torch-free, apart from ``runs.seed_runs``, for ``compare_runs`` and ``config_checks``.
"""

from __future__ import annotations

import re
import statistics

from omegaconf import DictConfig, OmegaConf

from sts_lightning.embeddings.errors import ConfigError

SPEARMAN = re.compile(r"^val/(.+)_spearman$")
AVG_TASK = "sts_avg"  # the STS callback's own average, not a task
AVG = "avg"


def check_seeds(cfg: DictConfig) -> list[int]:
    """The seeds to run, or one ``ConfigError`` line for a list or a combination that cannot work."""
    seeds = cfg.seeds
    values = list(seeds) if OmegaConf.is_list(seeds) or isinstance(seeds, (list, tuple)) else [seeds]
    if not values or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in values):
        raise ConfigError(f"seeds must be a list of integers >= 0, e.g. seeds=[0,1,2], got {seeds!r}")
    if len(set(values)) != len(values):
        raise ConfigError(f"seeds lists a seed twice: {values}")
    if cfg.get("pipeline"):
        raise ConfigError("seeds=[...] and a pipeline: a pipeline stage lists its own seeds (pipeline.stages[i].seeds)")
    if cfg.get("ckpt_path") not in (None, "last"):
        raise ConfigError("seeds=[...] resumes each seed from its own last.ckpt (hydra.run.dir=<run dir>); "
                          "ckpt_path=<file> would start every seed from one checkpoint")
    if cfg.get("push_to_hub"):
        raise ConfigError("seeds=[...] with push_to_hub: every seed would push to one repo; push the export you "
                          "choose afterwards (python -m sts_lightning.runs.hub_push <run dir>/seed<k>/export <repo>)")
    if not (cfg.get("callbacks") or {}).get("sts_evaluation"):
        raise ConfigError("seeds=[...] tabulates the STS scores of each seed: callbacks.sts_evaluation must be on")
    devices, nodes = cfg.trainer.get("devices", 1), cfg.trainer.get("num_nodes", 1)
    if not (devices in (1, "1") and nodes in (1, None)):
        raise ConfigError("seeds=[...] runs the seeds one after the other in one process, which a DDP launch cannot "
                          "repeat: on several devices start one job per seed (seed=<k> hydra.run.dir=<dir>/seed<k>)")
    return values


def task_scores(metrics: dict[str, float]) -> dict[str, float]:
    """``{task: Spearman x100}`` from a run's final ``val/<task>_spearman`` metrics."""
    return {m.group(1): float(v) for k, v in metrics.items() if (m := SPEARMAN.match(k)) and m.group(1) != AVG_TASK}


def _spread(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0}


def summarise_seeds(per_seed: dict[int, dict[str, float]]) -> dict:
    """``{"seeds", "tasks", "per_seed", "mean", "std"}`` over the tasks every seed scored; ``avg``: each seed's
    average over the tasks first, so its std is the spread of the seeds' averages."""
    scores = {seed: task_scores(metrics) for seed, metrics in per_seed.items()}
    tasks = [t for t in next(iter(scores.values())) if all(t in s for s in scores.values())] if scores else []
    rows = {str(seed): {**{t: s[t] for t in tasks}, AVG: statistics.fmean(s[t] for t in tasks) if tasks else float("nan")}
            for seed, s in scores.items()}
    columns = [*tasks, AVG]
    spread = {c: _spread([row[c] for row in rows.values()]) for c in columns}
    return {"seeds": [int(s) for s in rows], "tasks": tasks, "per_seed": rows,
            "mean": {c: spread[c]["mean"] for c in columns}, "std": {c: spread[c]["std"] for c in columns}}


def seed_table(summary: dict) -> str:
    columns = [*summary["tasks"], AVG]
    lines = ["| seed | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for seed, row in summary["per_seed"].items():
        lines.append(f"| {seed} | " + " | ".join(f"{row[c]:.2f}" for c in columns) + " |")
    lines.append(f"| mean ± std ({len(summary['seeds'])} seeds) | "
                 + " | ".join(f"{summary['mean'][c]:.2f} ± {summary['std'][c]:.2f}" for c in columns) + " |")
    return "\n".join([*lines, "", "std: sample standard deviation over the seeds (n - 1); avg: each seed's "
                      "average over the tasks, then mean ± std of those"])
