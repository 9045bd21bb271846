"""Sen2Pro at the cost of its passes: full Sen2Pro evaluation time vs 2N plain encodes of the same sentences.

Sen2Pro represents every sentence by N MC-dropout passes and N augmented copies, so its floor is 2N
plain (eval-mode) encodes of the sentences. This measures, in one process and with the same threads:

- plain: ``encoder.encode`` of the distinct sentences of the pairs (eval mode, the pooling Sen2Pro uses),
  timed before AND after the Sen2Pro run (median of all), so drift of a shared machine hits both sides;
- Sen2Pro: ``Sen2ProScorer.score_pairs`` over every pair (what ``evaluate.py`` runs), with the time
  of each source (model = MC-dropout passes, data = augmented copies) when the scorer reports it.

    python -m benchmarks.sen2pro_speed --model all-MiniLM-L6-v2 --tasks stsb-dev --n-samples 15 --threads 2
    python -m benchmarks.sen2pro_speed --max-pairs 400 --torch-dropout   # MC passes on torch's own dropout

The last line is ``ratio_sen2pro_vs_2N_plain X.XX`` = Sen2Pro time / (2N x plain time); the goal is <= 1.3.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from embeddings.encoders.load import load_encoder
from embeddings.methods.pooling import get_pooling
from embeddings.methods.sen2pro.scorer import Sen2ProScorer
from sts.tasks import load_task


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--data-dir", default=None, help="STS data dir (default: $STS_DATA_DIR)")
    parser.add_argument("--tasks", default="stsb-dev", help="comma-separated task names (pairs pooled)")
    parser.add_argument("--max-pairs", type=int, default=None, help="first pairs only (a quick run)")
    parser.add_argument("--n-samples", type=int, default=15, help="N per source (the paper: 15)")
    parser.add_argument("--pooling", default="first_last_avg")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--torch-dropout", action="store_true", help="MC passes on torch's own dropout (the old path)")
    parser.add_argument("--plain-repeats", type=int, default=2, help="plain encodes before and after Sen2Pro each")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    s1: list[str] = []
    s2: list[str] = []
    for name in args.tasks.split(","):
        for pairs in load_task(name.strip(), args.data_dir).subsets.values():
            s1 += pairs.sentences1
            s2 += pairs.sentences2
    if args.max_pairs is not None:
        s1, s2 = s1[: args.max_pairs], s2[: args.max_pairs]
    unique = list(dict.fromkeys([*s1, *s2]))
    encoder = load_encoder(args.model, batch_size=args.batch_size)
    pool = get_pooling(args.pooling)
    scorer = Sen2ProScorer(encoder, args.pooling, args.n_samples, fast_dropout=not args.torch_dropout)

    def plain() -> None:
        encoder.encode(unique, pool, show_progress=False)

    encoder.encode(unique[:256], pool, show_progress=False)  # warm-up (thread pools, allocator)
    plain_times = [timed(plain) for _ in range(args.plain_repeats)]
    sen2pro_time = timed(lambda: scorer.score_pairs(s1, s2))
    plain_times += [timed(plain) for _ in range(args.plain_repeats)]
    t_plain = statistics.median(plain_times)
    n = args.n_samples
    print(f"model {args.model}, tasks {args.tasks}: {len(s1)} pairs, {len(unique)} distinct sentences, "
          f"N={n}, pooling {args.pooling}, batch {args.batch_size}, threads {torch.get_num_threads()}, "
          f"{'torch' if args.torch_dropout else 'sparse'} MC dropout")
    print(f"plain encode: {t_plain:.2f}s (median of {len(plain_times)}: "
          + ", ".join(f"{t:.2f}" for t in plain_times) + ")")
    for source, secs in getattr(scorer, "last_seconds", {}).items():
        print(f"sen2pro {source}: {secs:.1f}s = {secs / (n * t_plain):.2f} x (N x plain)")
    for key, value in getattr(scorer, "last_stats", {}).items():
        print(f"sen2pro {key}: {value}")
    print(f"sen2pro total: {sen2pro_time:.1f}s; 2N x plain = {2 * n * t_plain:.1f}s")
    print(f"ratio_sen2pro_vs_2N_plain {sen2pro_time / (2 * n * t_plain):.2f}")


if __name__ == "__main__":
    main()
