"""The encode engine's settings measured against each other: padded vs packed, sentence count vs token budgets.

What it decides: ``DEFAULT_MAX_TOKENS`` (``embeddings.encoders.token_budget``) for a device and which path
``packing: auto`` takes there (``embeddings.encoders.hf.AUTO_PACKS_ON``). Each setting encodes the de-duplicated
sentences of ``--task`` with mean pooling, all settings alternating in one process (a, b, c, a, b, c, ...) so load
drift hits all alike; the table gives the median sentences/s, real tokens/s, the ratio to the old default (padded,
64 sentences a batch) and the largest difference of the pooled vectors to it (the packed path must equal the
padded one to rounding).

    python -m benchmarks.encode_engine                                   # this CPU, all-MiniLM-L6-v2, fp32
    python -m benchmarks.encode_engine --device cuda --precision bf16 --model <dir> --budgets 16384 32768 65536

The last line, ``best <path> max_tokens <n> <sentences/s>``, is the fastest setting.
"""

from __future__ import annotations

import argparse

import torch

from benchmarks.cpu_features import cpu_line
from benchmarks.device_timing import device_line
from benchmarks.encode_speed import alternating
from sts_lightning.embeddings.encoders.hf import HFEncoder
from sts_lightning.embeddings.encoders.packaged import resolve_model_path
from sts_lightning.embeddings.encoders.packing import VARLEN_STATE
from sts_lightning.embeddings.methods.pooling import mean_pool
from sts_lightning.sts.tasks import load_task

REFERENCE = ("padded", None)  # the old default: 64 sentences a batch


def settings(budgets: list[int], packed: bool) -> list[tuple[str, int | None]]:
    """``(path, max_tokens)`` pairs: the reference first, then each budget on each path."""
    paths = ("padded", "packed") if packed else ("padded",)
    return [REFERENCE, *((path, budget) for budget in budgets for path in paths)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--data-dir", default=None, help="STS data dir (default: $STS_DATA_DIR)")
    parser.add_argument("--task", default="stsb-dev")
    parser.add_argument("--budgets", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument("--reference-batch-size", type=int, default=64)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    task = load_task(args.task, args.data_dir)
    unique = list(dict.fromkeys(s for p in task.subsets.values() for s in (*p.sentences1, *p.sentences2)))
    path = resolve_model_path(args.model)
    encoders = {}
    for where, budget in settings(args.budgets, packed=True):
        size = args.reference_batch_size if (where, budget) == REFERENCE else None
        encoders[(where, budget)] = HFEncoder.from_pretrained(
            path, batch_size=size, max_tokens=budget, packing=where, precision=args.precision, device=args.device)
    first = next(iter(encoders.values()))
    tokens = sum(len(x) for x in first.tokenize(unique))
    for enc in encoders.values():  # warm-up
        enc.encode(unique[:64], mean_pool, show_progress=False)
    fns = {key: (lambda enc=enc: enc.encode(unique, mean_pool, show_progress=False)) for key, enc in encoders.items()}
    times, outs = alternating(fns, args.repeats, first.device)
    print(cpu_line())
    print(f"model {args.model}, task {args.task} ({len(unique)} unique sentences, {tokens} tokens), "
          f"{device_line(first.device)}, threads {args.threads}, {first.precision}, median of {args.repeats} "
          f"alternating runs; reference: padded, {args.reference_batch_size} sentences a batch")
    print("| path | max_tokens | sentences/s | tokens/s | vs reference | max abs diff to reference |")
    print("|---|---|---|---|---|---|")
    ref = times[REFERENCE]
    for (where, budget), seconds in times.items():
        diff = (outs[(where, budget)] - outs[REFERENCE]).abs().max().item()
        label = f"{args.reference_batch_size} sentences" if budget is None else str(budget)
        print(f"| {where} | {label} | {len(unique) / seconds:.1f} | {tokens / seconds:.0f} | {ref / seconds:.2f}x "
              f"| {diff:.1e} |")
    if first.device.type == "cuda":
        print(f"varlen kernel: {'used' if VARLEN_STATE['usable'] else 'not used: ' + VARLEN_STATE['reason']}")
    (where, budget), seconds = min(times.items(), key=lambda kv: kv[1])
    print(f"best {where} max_tokens {budget} {len(unique) / seconds:.1f}")


if __name__ == "__main__":
    main()
