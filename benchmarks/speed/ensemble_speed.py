"""Encoding speed of a distilled student against the ensemble it was distilled from, in one process.

The ensemble's cost is every source's forward pass plus the projection; the student is one small
transformer. Both encode the same STS sentences (no cache), alternating ``--repeats`` times so that
background load hits both alike; reported as sentences/s and the ratio student / ensemble.

    python -m benchmarks.speed.ensemble_speed --meta outputs/meta_gcca384 --student outputs/sed_meta/export \
        --data-dir ../shared/data --sentences 1000
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from benchmarks.results.ensemble_data import sts_tasks, task_sentences
from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.methods.pooling import PoolingScorer
from sts_lightning.embeddings.sources.build import load_meta_scorer


def timed(scorer, sentences) -> float:
    t0 = time.perf_counter()
    scorer.represent(sentences)
    return len(sentences) / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--meta", required=True, help="meta-embedding export directory (the ensemble)")
    parser.add_argument("--student", required=True, help="student export (or any encoder name)")
    parser.add_argument("--student-pooling", default="last2_avg")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    sentences = task_sentences(sts_tasks(args.data_dir, ["stsb-dev"]))[: args.sentences]
    ensemble = load_meta_scorer(args.meta)
    student = PoolingScorer(load_encoder(args.student), args.student_pooling)
    timed(student, sentences[:64]), timed(ensemble, sentences[:64])  # warm-up (lazy init, allocator)
    rates: dict[str, list[float]] = {"student": [], "ensemble": []}
    for _ in range(args.repeats):
        rates["student"].append(timed(student, sentences))
        rates["ensemble"].append(timed(ensemble, sentences))
    s, e = statistics.median(rates["student"]), statistics.median(rates["ensemble"])
    sources = " + ".join(src.name for src in ensemble.sources)
    print(f"| encoder | sentences/s (median of {args.repeats}) |\n|---|---|")
    print(f"| student ({args.student}, {args.student_pooling}) | {s:.1f} |")
    print(f"| ensemble ({sources} -> {ensemble.projection.method}) | {e:.1f} |")
    print(f"\nstudent / ensemble speed ratio: {s / e:.2f}x on {len(sentences)} STS-B dev sentences")


if __name__ == "__main__":
    main()
