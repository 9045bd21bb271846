"""How far one MC-dropout pass moves a sentence vector, against the distance between different sentences.

Why: Sen2Pro's model uncertainty averages MC-dropout passes; it can only work where dropout noise is small against
the differences between sentences. On a near-random encoder's CLS token it is not (docs/results/field_baselines.md):

    python -m benchmarks.dropout_noise --models bert-random-4x256,<export> --poolings cls,mean --data-dir ../shared/data
"""
from __future__ import annotations

import argparse

import torch

from benchmarks.cpu_features import cpu_line
from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.methods.pooling import get_pooling
from sts_lightning.sts.tasks import load_tasks


def noise_ratio(encoder: BaseEncoder, sentences: list[str], pooling: str, seed: int = 0) -> tuple[float, float]:
    """``(mean cosine between different sentences, dropout displacement / mean distance between sentences)``."""
    pool = get_pooling(pooling)
    clean = encoder.encode(sentences, pool)
    torch.manual_seed(seed)
    with encoder.stochastic():
        noisy = encoder.encode(sentences, pool)
    n = len(sentences)
    between = torch.cdist(clean, clean).sum() / (n * (n - 1))
    unit = torch.nn.functional.normalize(clean, dim=1)
    mean_cos = ((unit @ unit.T).sum() - n) / (n * (n - 1))
    return float(mean_cos), float((noisy - clean).norm(dim=1).mean() / between)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True, help="comma-separated encoders (names, exports)")
    parser.add_argument("--poolings", default="cls,mean")
    parser.add_argument("--task", default="stsb-dev")
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    task = load_tasks([args.task], args.data_dir)[0]
    sentences = list(dict.fromkeys(s for p in task.subsets.values() for s in p.sentences1))[:args.sentences]
    print(cpu_line())
    print("| encoder | pooling | mean cosine between sentences | dropout displacement / between-sentence distance |")
    print("|---|---|---|---|")
    for name in args.models.split(","):
        encoder = load_encoder(name, max_length=32)
        for pooling in args.poolings.split(","):
            mean_cos, ratio = noise_ratio(encoder, sentences, pooling)
            print(f"| {name} | {pooling} | {mean_cos:.3f} | {ratio:.2f} |", flush=True)


if __name__ == "__main__":
    main()
