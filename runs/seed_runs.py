"""``python train.py ... seeds=[0,1,2]``: one full training run per seed, then mean +- std of every STS task.

Each seed is an ordinary ``train()`` run in ``<run dir>/seed<k>``, one after the other in this process. Not Hydra's
multirun: that gives no step that sees every seed and re-runs the sweep in each DDP child. A resume skips finished
seeds and resumes an interrupted one; one under another config (``seeds_config.yaml``) is refused.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from sts_lightning.embeddings.errors import ConfigError, Preempted
from sts_lightning.embeddings.io.atomic import atomic_write
from sts_lightning.runs import train_run
from sts_lightning.runs.seed_table import check_seeds, seed_table, summarise_seeds

log = logging.getLogger(__name__)
DONE = "metrics.json"  # in a seed's directory: its final metrics, written last (the seed is finished)
CONFIG = "seeds_config.yaml"
TABLE_MD, TABLE_JSON = "seeds_sts.md", "seeds_sts.json"
NOT_COMPARED = ("seeds", "seed", "output_dir", "ckpt_path")  # what may differ between a run and its resume


def compared_config(cfg: DictConfig) -> dict:
    """The config a run directory's seeds share (``NOT_COMPARED`` left out), unresolved as Hydra saves it."""
    plain = OmegaConf.to_container(cfg, resolve=False)
    return {k: v for k, v in plain.items() if k not in NOT_COMPARED}


def _first_difference(old: object, new: object, key: str = "") -> str | None:
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new), key=str):
            found = _first_difference(old.get(k, "<absent>"), new.get(k, "<absent>"), f"{key}.{k}" if key else str(k))
            if found:
                return found
        return None
    return None if old == new else f"{key}: {old!r} then, {new!r} now"


def claim_run_dir(parent: Path, cfg: DictConfig) -> None:
    """Save the config the seeds share, or refuse a run directory whose seeds ran under another one."""
    saved, current = parent / CONFIG, compared_config(cfg)
    if saved.is_file():
        diff = _first_difference(OmegaConf.to_container(OmegaConf.load(saved)), current)
        if diff:
            raise ConfigError(f"{parent} holds seed runs of another config ({diff}): use the same overrides to "
                              "continue them, or another hydra.run.dir")
        return
    parent.mkdir(parents=True, exist_ok=True)
    atomic_write(saved, OmegaConf.to_yaml(OmegaConf.create(current)).encode())


def seed_config(cfg: DictConfig, seed: int, seed_dir: Path) -> DictConfig:
    """The single run of one seed: ``seed=<k>``, its own directory, resumed when its ``last.ckpt`` exists."""
    one = cfg.copy()
    with open_dict(one):
        one.seeds = None
        one.seed = seed
        one.output_dir = str(seed_dir)
        one.ckpt_path = "last" if (seed_dir / "checkpoints" / "last.ckpt").is_file() else None
    return one


def _save_hydra_files(one: DictConfig, parent: Path, seed_dir: Path) -> None:
    """``seed<k>/.hydra/`` as a single run leaves it, so a seed's directory reads like any run directory."""
    hydra = seed_dir / ".hydra"
    hydra.mkdir(parents=True, exist_ok=True)
    atomic_write(hydra / "config.yaml", OmegaConf.to_yaml(one).encode())
    if (parent / ".hydra" / "hydra.yaml").is_file():
        atomic_write(hydra / "hydra.yaml", (parent / ".hydra" / "hydra.yaml").read_bytes())


def run_seed(cfg: DictConfig, seed: int, parent: Path) -> dict[str, float]:
    """One seed's final metrics: read back when it finished earlier, else trained (or resumed) now."""
    seed_dir = parent / f"seed{seed}"
    done = seed_dir / DONE
    if done.is_file():
        log.info("seeds: seed %d finished earlier (%s): skipped", seed, seed_dir)
        return json.loads(done.read_text())
    one = seed_config(cfg, seed, seed_dir)
    _save_hydra_files(one, parent, seed_dir)
    log.info("seeds: seed %d %s in %s", seed, "resumes from its last.ckpt" if one.ckpt_path else "starts", seed_dir)
    try:
        metrics = train_run.train(one)
    except Preempted as err:  # the single run's hint names the seed's directory; the seeds command resumes all
        raise Preempted(f"seed {seed}: {err}. Continue all seeds with the same command plus hydra.run.dir={parent} "
                        "(finished seeds are skipped, this one resumes from its last.ckpt)") from None
    atomic_write(done, json.dumps(metrics, indent=1).encode())
    return metrics


def run_seeds(cfg: DictConfig) -> dict[str, float]:
    """Run every seed of ``cfg.seeds`` under ``cfg.output_dir``, write and print the table; returns the mean metrics."""
    seeds = check_seeds(cfg)
    parent = Path(cfg.output_dir)
    claim_run_dir(parent, cfg)
    log.info("seeds %s: one run each in %s/seed<k>; to continue after an interruption, run the same command "
             "with hydra.run.dir=%s", seeds, parent, parent)
    per_seed = {seed: run_seed(cfg, seed, parent) for seed in seeds}
    summary = summarise_seeds(per_seed)
    table = seed_table(summary)
    atomic_write(parent / TABLE_MD, (table + "\n").encode())
    atomic_write(parent / TABLE_JSON, json.dumps(summary, indent=1).encode())
    print(table)
    print(f"wrote {parent / TABLE_MD} and {parent / TABLE_JSON}")
    keys = set.intersection(*(set(m) for m in per_seed.values()))
    return {k: sum(m[k] for m in per_seed.values()) / len(per_seed) for k in sorted(keys)}
