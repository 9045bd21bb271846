"""Optional W&B logging of an evaluation (config, one metric per encoder / scorer / task, the table); offline too."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf


def log_results(cfg: DictConfig, results: list[dict], paths: dict[str, Path]) -> None:
    import wandb

    run = wandb.init(project=cfg.wandb.project, entity=cfg.wandb.get("entity"), mode=cfg.wandb.mode,
                     dir=str(cfg.output_dir), job_type="evaluate",
                     config=OmegaConf.to_container(cfg, resolve=True))
    columns = ["encoder", "scorer", "task", "spearman", "pearson", "n"]
    table = wandb.Table(columns=columns)
    for r in results:
        for task, res in r["tasks"].items():
            allr = res["all"]
            run.summary[f"eval/{r['encoder']}/{r['scorer']}/{task}_spearman"] = allr["spearman"]
            table.add_data(r["encoder"], r["scorer"], task, allr["spearman"], allr["pearson"], allr["n"])
    run.log({"eval/table": table})
    if paths.get("png") and paths["png"].exists():
        run.log({"eval/chart": wandb.Image(str(paths["png"]))})
    run.finish()
