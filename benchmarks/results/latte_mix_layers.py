"""Layer sweep (Latte-Mix paper, Fig. 3): STS-B dev Spearman of mean pooling vs Latte-Mix at every layer.

For each hidden-state layer of the backbone (0 = embedding output ... last), mean pooling of that layer is
scored once, and a categorical token VAE is trained on that layer's cached token states for each seed and
scored with cosine (and JS); the figure shows mean pooling and Latte-Mix mean +- std over seeds.

    python -m benchmarks.results.latte_mix_layers --model all-MiniLM-L6-v2 --seeds 0,1,2 --data-dir ../shared/data \
        --out docs/latte_mix_layers.png
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

os.environ.setdefault("WANDB_MODE", "disabled")

import torch  # noqa: E402

from benchmarks.results.latte_mix_sweep import score, train_one  # noqa: E402
from sts_lightning.datamodules.token_states import TokenStateDataModule
from sts_lightning.embeddings.encoders.layer_memo import LayerMemoEncoder  # noqa: E402
from sts_lightning.embeddings.encoders.load import load_encoder  # noqa: E402
from sts_lightning.embeddings.methods.latte_mix.scorer import LatteMixScorer  # noqa: E402
from sts_lightning.embeddings.methods.pooling import PoolingScorer  # noqa: E402
from sts_lightning.sts.tasks import load_task  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--files", default="nli:snli:dev,nli:snli:test")
    parser.add_argument("--max-sentences", type=int, default=None)
    parser.add_argument("--task", default="stsb-dev")
    parser.add_argument("--distances", default="cosine,js")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--out", default="latte_mix_layers.png")
    parser.add_argument("--replot", default=None, help="only redraw the figure from a JSON this script wrote")
    args = parser.parse_args()
    if args.replot:
        saved = json.loads(Path(args.replot).read_text())
        results = {k: {int(layer): v for layer, v in by_layer.items()} for k, by_layer in saved["results"].items()}
        args.task, args.model = saved["args"]["task"], saved["args"]["model"]
        plot(results, args)
        return
    torch.set_num_threads(args.threads)
    args.max_length, args.batch_size, args.set = None, 16, {}

    tasks = [load_task(args.task, args.data_dir)]
    base = load_encoder(args.model)
    results: dict[str, dict[int, list[float]]] = {"mean pooling": {}}
    for layer in range(base.num_layers):
        args.layer = layer
        encoder = LayerMemoEncoder(base, layer=layer)
        results["mean pooling"][layer] = [score(PoolingScorer(encoder, "mean"), tasks)[args.task]]
        datamodule = TokenStateDataModule(data_dir=args.data_dir, files=args.files.split(","), model_name_or_path=args.model,
                                          layer=layer, batch_size=16, cache_dir=args.cache_dir,
                                          max_sentences=args.max_sentences)
        datamodule.prepare_data()
        datamodule.setup("fit")
        for seed in (int(s) for s in args.seeds.split(",")):
            module, _ = train_one({"latent": "categorical"}, seed, datamodule, args, datamodule.feature_dim)
            for distance in args.distances.split(","):
                scorer = LatteMixScorer(encoder, module.posterior, layer=-1, latent="categorical", distance=distance,
                                        tau=module.hparams.tau)
                results.setdefault(f"Latte-Mix + {distance}", {}).setdefault(layer, []).append(
                    score(scorer, tasks)[args.task])
        print(f"layer {layer}: " + ", ".join(f"{k} {statistics.mean(v[layer]):.2f}" for k, v in results.items()),
              flush=True)
    Path(args.out).with_suffix(".json").write_text(json.dumps({"args": vars(args), "results": results}, indent=1))
    plot(results, args)


def plot(results: dict[str, dict[int, list[float]]], args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, by_layer in results.items():
        layers = sorted(by_layer)
        means = [statistics.mean(by_layer[i]) for i in layers]
        stds = [statistics.stdev(by_layer[i]) if len(by_layer[i]) > 1 else 0.0 for i in layers]
        ax.errorbar(layers, means, yerr=stds, marker="o", capsize=3, label=name)
    ax.set_xticks(sorted({i for by_layer in results.values() for i in by_layer}))
    ax.set_xlabel("layer (0 = embedding output)")
    ax.set_ylabel(f"{args.task} Spearman x 100")
    ax.set_title(f"{args.model}: mean pooling vs Latte-Mix per layer (mean +- std over seeds)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
