"""Latte-Mix paper comparisons on our backbones: mean pooling vs token VAEs, over seeds, one process.

For one frozen encoder and layer, the training token states are cached once (``TokenStateDataModule``)
and the STS sentences are encoded once (``LayerMemoEncoder``); then every configuration x seed trains a
``LatteMixModule`` for one epoch with a plain Lightning ``Trainer`` and is scored through the same
``LatteMixScorer`` that ``evaluate.py`` uses, with every distance valid for its latent. Results are
printed as a markdown table of mean +- std over seeds and written as JSON.

    python -m benchmarks.results.latte_mix_sweep --model all-MiniLM-L6-v2 --grid table1 --seeds 0,1,2 \
        --data-dir ../shared/data --out results/latte_l6_table1.json

Grids: ``table1`` (categorical, paper defaults), ``table2`` (AE / Normal / categorical x 1-3 encoder
layers), ``latents`` (the three latents, 1-layer encoders), ``classes`` (K 20-200), ``dims`` (D 16-128), ``tau`` (0.03-2).
"""

from __future__ import annotations

import argparse
import ast
import json
import logging
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("WANDB_MODE", "disabled")

import torch  # noqa: E402

from sts_lightning.datamodules.token_states import TokenStateDataModule
from sts_lightning.embeddings.encoders.layer_memo import LayerMemoEncoder  # noqa: E402
from sts_lightning.embeddings.encoders.load import load_encoder  # noqa: E402
from sts_lightning.embeddings.methods.latte_mix.scorer import LatteMixScorer  # noqa: E402
from sts_lightning.embeddings.methods.pooling import PoolingScorer  # noqa: E402
from sts_lightning.lightning_modules.latte_mix import LatteMixModule
from sts_lightning.sts.scoring import main_score, score_tasks  # noqa: E402
from sts_lightning.sts.tasks import load_task  # noqa: E402

DISTANCES = {"categorical": ("cosine", "js", "l2"), "normal": ("l2", "cosine"), "ae": ("cosine",)}
GRIDS = {
    "table1": [{"latent": "categorical"}],
    "table2": [{"latent": lat, "encoder_layers": n} for lat in ("ae", "normal", "categorical") for n in (1, 2, 3)],
    "latents": [{"latent": lat} for lat in ("ae", "normal", "categorical")],
    "normal": [{"latent": "normal"}],
    "classes": [{"latent": "categorical", "num_classes": k} for k in (20, 50, 100, 200)],
    "dims": [{"latent": "categorical", "latent_dim": d} for d in (16, 32, 64, 128)],
    "tau": [{"latent": "categorical", "tau": t} for t in (0.03, 0.3, 1.0, 2.0)],
}


def label(config: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())


def train_one(config: dict, seed: int, datamodule, args, input_dim: int):
    """``args.epochs`` epochs of a token VAE on the cached features; returns the trained module (CPU, eval mode)."""
    import lightning as L


    L.seed_everything(seed, workers=True)
    module = LatteMixModule(model_name_or_path=args.model, layer=args.layer, max_length=args.max_length,
                            input_dim=input_dim, **{**args.set, **config})
    trainer = L.Trainer(max_epochs=args.epochs, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        limit_val_batches=0)
    trainer.fit(module, datamodule=datamodule)
    logged = {k: float(v) for k, v in trainer.callback_metrics.items()}
    return module.eval(), logged


def score(scorer, tasks) -> dict[str, float]:
    results = score_tasks(scorer, tasks)
    return {name: main_score(result) for name, result in results.items()}  # already x100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--layer", type=int, default=-1)
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--grid", default="table1", choices=sorted(GRIDS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--files", default="nli:snli:dev,nli:snli:test", help="training sentences")
    parser.add_argument("--max-sentences", type=int, default=None)
    parser.add_argument("--tasks", default="sts12,sts16,stsb-dev,sick-train+sick-trial")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--set", nargs="*", default=[], help="LatteMixModule overrides for every run, e.g. lr=3e-3")
    parser.add_argument("--out", default=None, help="JSON file for all runs")
    parser.add_argument("--merge", nargs="+", default=None, help="only print the table of these --out files")
    args = parser.parse_args()
    if args.merge:
        runs = [json.loads(Path(f).read_text()) for f in args.merge]
        rows = [r for run in runs for r in run["rows"]]
        unique = {r["method"]: r for r in rows if r["seed"] is None}  # the baseline is deterministic: once
        rows = [*unique.values(), *(r for r in rows if r["seed"] is not None)]
        print(markdown(rows, list(rows[0]["scores"])))
        return
    args.set = {k: ast.literal_eval(v) for k, v in (item.split("=", 1) for item in args.set)}
    torch.set_num_threads(args.threads)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)

    datamodule = TokenStateDataModule(data_dir=args.data_dir, files=args.files.split(","),
                                        model_name_or_path=args.model, layer=args.layer, max_length=args.max_length,
                                        batch_size=args.batch_size, cache_dir=args.cache_dir,
                                        max_sentences=args.max_sentences)
    datamodule.prepare_data()
    datamodule.setup("fit")
    tasks = [load_task(t, args.data_dir) for t in args.tasks.split(",")]
    encoder = LayerMemoEncoder(load_encoder(args.model, max_length=args.max_length), layer=args.layer)
    rows: list[dict] = [{"method": "mean pooling", "seed": None, "scores": score(PoolingScorer(encoder, "mean"), tasks)}]
    print(f"{args.model} layer {args.layer}: mean pooling {rows[0]['scores']}", flush=True)
    for config in GRIDS[args.grid]:
        for seed in (int(s) for s in args.seeds.split(",")):
            t0 = time.time()
            module, logged = train_one(config, seed, datamodule, args, datamodule.feature_dim)
            for distance in DISTANCES[config["latent"]]:
                scorer = LatteMixScorer(encoder, module.posterior, layer=-1, latent=config["latent"],
                                        distance=distance, tau=module.hparams.score_tau or module.hparams.tau)
                rows.append({"method": f"{label(config)} + {distance}", "seed": seed,
                             "scores": score(scorer, tasks), "train": logged})
                print(f"seed {seed} {rows[-1]['method']}: {rows[-1]['scores']} ({time.time() - t0:.0f}s) "
                      f"train {({k: round(v, 3) for k, v in logged.items()})}", flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    print(markdown(rows, [t.name for t in tasks]))


def markdown(rows: list[dict], tasks: list[str]) -> str:
    """Mean +- std over seeds per method (x100)."""
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lines = ["| method | " + " | ".join(tasks) + " | avg |", "|---" * (len(tasks) + 2) + "|"]
    for method in methods:
        runs = [r["scores"] for r in rows if r["method"] == method]
        cells = []
        for key in [*tasks, "avg"]:
            values = [sum(r[t] for t in tasks) / len(tasks) if key == "avg" else r[key] for r in runs]
            std = statistics.stdev(values) if len(values) > 1 else 0.0
            cells.append(f"{statistics.mean(values):.2f}" + (f" ± {std:.2f}" if len(values) > 1 else ""))
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
