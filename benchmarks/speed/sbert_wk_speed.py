"""SBERT-WK evaluation time against a mean-pooling evaluation of the same model, and parity with the loop.

Both evaluations are what ``evaluate.py`` does per scorer (tokenize, all-layer forward, pool, cosine, Spearman on
STS-B dev) with the same encoder, batch size and threads, in turn, timed by the median; the SBERT-WK pool is also
timed alone. A last check runs ``sbert_wk_pool`` and the literal loop (``sbert_wk_loop.py``) on the same hidden
states: their largest cosine distance, and the pool's speed-up over the loop.

    python -m benchmarks.speed.sbert_wk_speed                                  # all-MiniLM-L6-v2, 1 thread
    python -m benchmarks.speed.sbert_wk_speed --model all-mpnet-base-v2 --repeats 3

The last line, ``ratio_sbert_wk_vs_mean X.XX``, is SBERT-WK's median evaluation time over mean pooling's;
the line before it gives the STS-B dev Spearman of both.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

if not __package__:  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from benchmarks.speed.sbert_wk_loop import sbert_wk_loop  # noqa: E402
from sts_lightning.embeddings.encoders.base import BaseEncoder  # noqa: E402
from sts_lightning.embeddings.encoders.load import load_encoder  # noqa: E402
from sts_lightning.embeddings.encoders.token_batch import TokenBatch  # noqa: E402
from sts_lightning.embeddings.methods.pooling import PoolingScorer  # noqa: E402
from sts_lightning.embeddings.methods.sbert_wk import SBERTWKScorer, sbert_wk_pool  # noqa: E402
from sts_lightning.sts.scoring import main_score, score_tasks  # noqa: E402
from sts_lightning.sts.tasks import STSTask, load_task  # noqa: E402


class TimedPool:
    """Wraps a pooling function and adds up the seconds spent inside it."""

    def __init__(self, pool: Callable[[TokenBatch], torch.Tensor]) -> None:
        self.pool, self.seconds = pool, 0.0

    def __call__(self, batch: TokenBatch) -> torch.Tensor:
        t0 = time.perf_counter()
        out = self.pool(batch)
        self.seconds += time.perf_counter() - t0
        return out


def timed_in_turn(runs: dict[str, Callable[[], dict]], repeats: int) -> tuple[dict[str, float], dict[str, dict]]:
    """Median seconds and last result of each run, in turn and in reversed order every other repeat
    (a b, b a, a b, ...) so that drift in the machine's load hits all of them alike."""
    seconds: dict[str, list[float]] = {key: [] for key in runs}
    results: dict[str, dict] = {}
    for r in range(repeats):
        for key in list(runs)[:: 1 if r % 2 == 0 else -1]:
            t0 = time.perf_counter()
            results[key] = runs[key]()
            seconds[key].append(time.perf_counter() - t0)
    return {key: statistics.median(v) for key, v in seconds.items()}, results


def collect_batches(encoder: BaseEncoder, sentences: list[str]) -> list[TokenBatch]:
    """Run the model once and keep every ``TokenBatch`` it produced."""
    batches: list[TokenBatch] = []

    def keep(batch: TokenBatch) -> torch.Tensor:
        batches.append(batch)
        return torch.zeros(batch.attention_mask.shape[0], 1)

    encoder.encode(sentences, keep, show_progress=False)
    return batches


def loop_parity(encoder: BaseEncoder, sentences: list[str], layer_start: int, window: int) -> str:
    """Max cosine distance of ``sbert_wk_pool`` to the per-token loop on the same states, and the speed-up."""
    batches = collect_batches(encoder, sentences)
    t0 = time.perf_counter()
    fast = torch.cat([sbert_wk_pool(b, layer_start, window) for b in batches]).double()
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    slow = [sbert_wk_loop(torch.stack(b.hidden_states, 1).double().numpy(), b.attention_mask.numpy(), layer_start,
                          window) for b in batches]
    t_loop = time.perf_counter() - t0
    dist = 1 - torch.nn.functional.cosine_similarity(fast, torch.from_numpy(np.concatenate(slow)), dim=1)
    return (f"parity on {len(sentences)} sentences: max cosine distance to the per-token loop "
            f"{dist.max().item():.1e}; pool {t_fast:.3f} s vs loop {t_loop:.2f} s ({t_loop / t_fast:.0f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("STS_DATA_DIR", "/work/shared/data")))
    parser.add_argument("--task", default="stsb-dev")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--layer-start", default="auto", help="SBERT-WK layer_start (int or 'auto')")
    parser.add_argument("--window", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="torch and BLAS threads for both")
    parser.add_argument("--repeats", type=int, default=3, help="evaluations of each (median)")
    parser.add_argument("--parity-sentences", type=int, default=200, help="sentences for the loop check (0: skip)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    layer_start = args.layer_start if args.layer_start == "auto" else int(args.layer_start)

    task: STSTask = load_task(args.task, args.data_dir)
    encoder = load_encoder(args.model, batch_size=args.batch_size)
    mean = PoolingScorer(encoder, "mean")
    wk = SBERTWKScorer(encoder, layer_start=layer_start, window=args.window)
    wk_pool = TimedPool(wk.pool)
    wk.pool = wk_pool
    sentences = list(dict.fromkeys(s for p in task.subsets.values() for s in (*p.sentences1, *p.sentences2)))
    print(f"{args.model}: {encoder.num_layers} hidden-state layers, hidden {encoder.hidden_size}; {args.task}: "
          f"{sum(len(p) for p in task.subsets.values())} pairs, {len(sentences)} distinct sentences; batch "
          f"{args.batch_size}, threads {args.threads}; SBERT-WK layer_start={wk.layer_start}, window={args.window}")

    with threadpool_limits(args.threads):
        score_tasks(mean, [task])  # warm-up: first-call allocations, tokenizer caches
        times, results = timed_in_turn({"mean": lambda: score_tasks(mean, [task]),
                                        "sbert_wk": lambda: score_tasks(wk, [task])}, args.repeats)
        pool_seconds = wk_pool.seconds / args.repeats
        if args.parity_sentences:
            print(loop_parity(encoder, sentences[: args.parity_sentences], wk.layer_start, args.window))

    runs = f"median of {args.repeats}, run in turn"
    print(f"mean-pooling evaluation: {times['mean']:.2f} s ({runs})")
    print(f"SBERT-WK evaluation:     {times['sbert_wk']:.2f} s; of which the SBERT-WK pool {pool_seconds:.2f} s "
          f"({100 * pool_seconds / times['sbert_wk']:.1f}%, mean over runs)")
    spearman = {k: main_score(r[args.task]) for k, r in results.items()}
    print(f"{args.task} Spearman x100: mean {spearman['mean']:.2f}, sbert_wk {spearman['sbert_wk']:.2f}")
    print(f"ratio_sbert_wk_vs_mean {times['sbert_wk'] / times['mean']:.2f}")


if __name__ == "__main__":
    main()
