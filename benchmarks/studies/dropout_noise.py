"""How far one MC-dropout pass moves a sentence vector, against the distance between different sentences.

Why: Sen2Pro's model uncertainty averages MC-dropout passes; it can only work where dropout noise is small against
the differences between sentences. On a near-random encoder's CLS token it is not (docs/results/field_baselines.md):

    python -m benchmarks.studies.dropout_noise --models bert-random-4x256,<export> --poolings cls,mean --data-dir ../shared/data
"""
from __future__ import annotations

import argparse

import torch

from benchmarks.tools.cpu_features import cpu_line
from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.methods.pooling import get_pooling
from sts_lightning.sts.tasks import STSTask, load_tasks


def distinct_first_sentences(task: STSTask, limit: int) -> list[str]:
    """The first ``limit`` distinct first sentences of a task's pairs (real, varied, short)."""
    first = (s for pairs in task.subsets.values() for s in pairs.sentences1)
    return list(dict.fromkeys(first))[:limit]


def mean_pairwise_cosine(vectors: torch.Tensor) -> float:
    """Mean cosine over all pairs of distinct rows (the diagonal left out): how alike unrelated sentences are."""
    n = len(vectors)
    if n < 2:
        raise ValueError(f"mean pairwise cosine needs at least 2 vectors, got {n}")
    unit = torch.nn.functional.normalize(vectors.double(), dim=-1)
    sims = unit @ unit.T
    return float((sims.sum() - sims.diagonal().sum()) / (n * n - n))


def noise_ratio(encoder: BaseEncoder, sentences: list[str], pooling: str, seed: int = 0) -> tuple[float, float]:
    """``(mean cosine between different sentences, dropout displacement / mean distance between sentences)``."""
    pool = get_pooling(pooling)
    clean = encoder.encode(sentences, pool)
    torch.manual_seed(seed)
    with encoder.stochastic():
        noisy = encoder.encode(sentences, pool)
    n = len(sentences)
    between = torch.cdist(clean, clean).sum() / (n * (n - 1))
    return mean_pairwise_cosine(clean), float((noisy - clean).norm(dim=1).mean() / between)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True, help="comma-separated encoders (names, exports)")
    parser.add_argument("--poolings", default="cls,mean")
    parser.add_argument("--task", default="stsb-dev")
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    task = load_tasks([args.task], args.data_dir)[0]
    sentences = distinct_first_sentences(task, args.sentences)
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
