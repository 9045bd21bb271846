"""Sen2Pro at the cost of its passes: full Sen2Pro evaluation time vs 2N plain encodes of the same sentences.

Sen2Pro represents every sentence by N MC-dropout passes and N augmented copies, so its floor is 2N plain encodes.
In one process with the same threads: plain ``encoder.encode`` of the distinct sentences (timed before and after, so
drift hits both sides) and ``Sen2ProScorer.score_pairs`` over every pair (with each source's time when reported),
plus both Spearman x100, so a ``--max-pairs`` subset doubles as a quality check.

    python -m benchmarks.speed.sen2pro_speed --model all-MiniLM-L6-v2 --tasks stsb-dev --n-samples 15 --threads 2
    python -m benchmarks.speed.sen2pro_speed --max-pairs 400 --torch-dropout   # MC passes on torch's own dropout
    python -m benchmarks.speed.sen2pro_speed --model all-mpnet-base-v2 --precision bf16 --max-pairs 200
    python -m benchmarks.speed.sen2pro_speed --pass-repeats 3   # first: single passes in turn, plain vs MC dropout

The last line is ``ratio_sen2pro_vs_2N_plain X.XX`` = Sen2Pro time / (2N x plain time).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch

from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.methods.pooling import get_pooling
from sts_lightning.embeddings.methods.sen2pro.mc_dropout import mc_dropout
from sts_lightning.embeddings.methods.sen2pro.scorer import Sen2ProScorer
from sts_lightning.sts.tasks import load_task


def spearman100(pred: torch.Tensor, gold: list[float]) -> float:
    from scipy.stats import spearmanr

    return 100 * float(spearmanr(pred.numpy(), gold).statistic)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def single_passes(encoder, sentences: list[str], pool, repeats: int) -> None:
    """One pass each of plain, sparse MC dropout and torch's MC dropout, in turn, ``repeats`` times."""
    modes = {"plain (eval)": contextlib.nullcontext, "MC dropout, sparse": lambda: mc_dropout(encoder),
             "MC dropout, torch": lambda: mc_dropout(encoder, fast=False)}
    times: dict[str, list[float]] = {k: [] for k in modes}
    for _ in range(repeats):
        for key, context in modes.items():
            with context():
                times[key].append(timed(lambda: encoder.encode(sentences, pool, show_progress=False)))
    base = statistics.median(times["plain (eval)"])
    for key, values in times.items():
        med = statistics.median(values)
        print(f"one pass, {key}: {med:.2f}s = {med / base:.2f} x plain (median of {repeats}, in turn: "
              + ", ".join(f"{t:.2f}" for t in values) + ")")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--data-dir", default=None, help="STS data dir (default: $STS_DATA_DIR)")
    parser.add_argument("--tasks", default="stsb-dev", help="comma-separated task names (pairs pooled)")
    parser.add_argument("--max-pairs", type=int, default=None,
                        help="at most this many pairs, evenly spaced over the tasks' pairs (a quick run)")
    parser.add_argument("--n-samples", type=int, default=15, help="N per source (the paper: 15)")
    parser.add_argument("--pooling", default="first_last_avg")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"],
                        help="encoder.precision of every pass (plain and Sen2Pro alike)")
    parser.add_argument("--torch-dropout", action="store_true", help="MC passes on torch's own dropout (the old path)")
    parser.add_argument("--pass-repeats", type=int, default=0,
                        help="also time single passes in turn (plain, MC sparse, MC torch) this many times each")
    parser.add_argument("--plain-repeats", type=int, default=2, help="plain encodes before and after Sen2Pro each")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    s1: list[str] = []
    s2: list[str] = []
    gold: list[float] = []
    for name in args.tasks.split(","):
        for pairs in load_task(name.strip(), args.data_dir).subsets.values():
            s1 += pairs.sentences1
            s2 += pairs.sentences2
            gold += [float(g) for g in pairs.scores]
    if args.max_pairs is not None and args.max_pairs < len(s1):
        keep = [i * len(s1) // args.max_pairs for i in range(args.max_pairs)]
        s1, s2, gold = [s1[i] for i in keep], [s2[i] for i in keep], [gold[i] for i in keep]
    unique = list(dict.fromkeys([*s1, *s2]))
    encoder = load_encoder(args.model, batch_size=args.batch_size, precision=args.precision)
    pool = get_pooling(args.pooling)
    scorer = Sen2ProScorer(encoder, args.pooling, args.n_samples, fast_dropout=not args.torch_dropout)

    plain_vectors: list[torch.Tensor] = []

    def plain() -> None:
        plain_vectors[:] = [encoder.encode(unique, pool, show_progress=False)]

    print(f"model {args.model}, tasks {args.tasks}: {len(s1)} pairs, {len(unique)} distinct sentences, "
          f"N={args.n_samples}, pooling {args.pooling}, batch {args.batch_size}, threads {torch.get_num_threads()}, "
          f"precision {args.precision}, "
          f"{'torch' if args.torch_dropout else 'sparse'} MC dropout", flush=True)
    encoder.encode(unique[:256], pool, show_progress=False)  # warm-up (thread pools, allocator)
    if args.pass_repeats:
        single_passes(encoder, unique, pool, args.pass_repeats)
    plain_times = [timed(plain) for _ in range(args.plain_repeats)]
    sims: list[torch.Tensor] = []
    sen2pro_time = timed(lambda: sims.append(scorer.score_pairs(s1, s2)))
    plain_times += [timed(plain) for _ in range(args.plain_repeats)]
    t_plain = statistics.median(plain_times)
    n = args.n_samples
    print(f"plain encode: {t_plain:.2f}s (median of {len(plain_times)}: "
          + ", ".join(f"{t:.2f}" for t in plain_times) + ")")
    for source, secs in getattr(scorer, "last_seconds", {}).items():
        print(f"sen2pro {source}: {secs:.1f}s = {secs / (n * t_plain):.2f} x (N x plain)")
    for key, value in getattr(scorer, "last_stats", {}).items():
        print(f"sen2pro {key}: {value}")
    print(f"sen2pro total: {sen2pro_time:.1f}s; 2N x plain = {2 * n * t_plain:.1f}s")
    index = {s: i for i, s in enumerate(unique)}
    a, b = (plain_vectors[0][[index[s] for s in side]] for side in (s1, s2))
    cosine = torch.nn.functional.cosine_similarity(a, b, dim=-1)
    print(f"Spearman x100 on these pairs: {args.pooling} (cosine) {spearman100(cosine, gold):.2f}, "
          f"sen2pro {spearman100(sims[0], gold):.2f}")
    print(f"ratio_sen2pro_vs_2N_plain {sen2pro_time / (2 * n * t_plain):.2f}")


if __name__ == "__main__":
    main()
