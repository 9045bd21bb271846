"""The encode engine's settings measured against each other: padded vs packed, sentence count vs token budgets.

What it decides: ``DEFAULT_MAX_TOKENS`` (``embeddings.encoders.token_budget``) for a device and which path
``packing: auto`` takes there (``embeddings.encoders.hf.AUTO_PACKS_ON``). Each setting encodes the de-duplicated
sentences of ``--task`` with mean pooling, all settings alternating in one process (a, b, c, a, b, c, ...) so load
drift hits all alike; the table gives the median sentences/s, real tokens/s, the ratio to the old default (padded,
64 sentences a batch) and the largest difference of the pooled vectors to it (the packed path must equal the
padded one to rounding).

    python -m benchmarks.speed.encode_engine                                   # this CPU, all-MiniLM-L6-v2, fp32
    python -m benchmarks.speed.encode_engine --device cuda --precision bf16 --model <dir> --budgets 16384 32768 65536

The last line, ``best <path> max_tokens <n> <sentences/s>``, is the fastest setting. ``--attention`` first times
the block-diagonal attention candidates ``embeddings.encoders.packing`` chose among, on one token-budget batch of
the task's sentences (the model's heads and head size, random q / k / v).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
import torch.nn.functional as F

from benchmarks.speed.encode_speed import alternating
from benchmarks.tools.cpu_features import cpu_line
from benchmarks.tools.device_timing import device_line
from sts_lightning.embeddings.encoders.hf import HFEncoder
from sts_lightning.embeddings.encoders.packaged import resolve_model_path
from sts_lightning.embeddings.encoders.packing import VARLEN_STATE, pack_ids
from sts_lightning.embeddings.methods.pooling import mean_pool
from sts_lightning.sts.tasks import load_task

REFERENCE = ("padded", None)  # the old default: 64 sentences a batch


def settings(budgets: list[int], packed: bool) -> list[tuple[str, int | None]]:
    """``(path, max_tokens)`` pairs: the reference first, then each budget on each path."""
    paths = ("padded", "packed") if packed else ("padded",)
    return [REFERENCE, *((path, budget) for budget in budgets for path in paths)]


def attention_candidates(ids: list[list[int]], heads: int, dim: int, repeats: int = 5) -> dict[str, float | str]:
    """Median ms of one block-diagonal attention over the packed batch ``ids``, per candidate (an error: its line)."""
    _, _, layout = pack_ids(ids, torch.device("cpu"))
    n = layout.tokens
    q, k, v = (torch.randn(1, heads, n, dim) for _ in range(3))
    segment = torch.repeat_interleave(torch.arange(len(ids)), torch.tensor(layout.lengths))
    dense_mask = segment[:, None] == segment[None, :]

    def gathered():
        def pad(x):
            return x[0][:, layout.gather].transpose(0, 1)
        out = F.scaled_dot_product_attention(pad(q), pad(k), pad(v), attn_mask=layout.key_mask)
        return out.transpose(1, 2).reshape(-1, heads, dim).index_select(0, layout.flat)

    def nested():
        def jagged(x):
            values = x[0].transpose(0, 1).contiguous()
            return torch.nested.nested_tensor_from_jagged(values, layout.cu_seqlens.long()).transpose(1, 2)
        return F.scaled_dot_product_attention(jagged(q), jagged(k), jagged(v))

    def flex():
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        mask = create_block_mask(lambda b, h, i, j: segment[i] == segment[j], None, None, n, n, device="cpu")
        return flex_attention(q, k, v, block_mask=mask)

    candidates = {"gathered SDPA (chosen)": gathered,
                  "dense block-diagonal mask": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=dense_mask),
                  "SDPA over nested jagged tensors": nested, "FlexAttention, eager": flex}
    out: dict[str, float | str] = {}
    for name, fn in candidates.items():
        try:
            fn()
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            out[name] = 1e3 * statistics.median(times)
        except Exception as err:  # noqa: BLE001 - a candidate this torch cannot run is a result, not a failure
            out[name] = f"{type(err).__name__}: {str(err).splitlines()[0][:80]}"
    return out


def budget_batch(ids: list[list[int]], budget: int, seed: int = 0) -> list[list[int]]:
    """Sentences drawn at random until ``budget`` real tokens: a mixed-length batch as a packed pass sees one."""
    pool = random.Random(seed).sample(ids, len(ids))
    batch, used = [], 0
    for x in pool:
        if used + len(x) > budget:
            break
        batch.append(x)
        used += len(x)
    return batch


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--data-dir", default=None, help="STS data dir (default: $STS_DATA_DIR)")
    parser.add_argument("--task", default="stsb-dev")
    parser.add_argument("--budgets", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument("--limit", type=int, default=None, help="only the first N unique sentences (a loaded machine)")
    parser.add_argument("--attention", type=int, default=None, metavar="TOKENS",
                        help="also time the attention candidates on a random batch of this many tokens")
    parser.add_argument("--padded-only", action="store_true", help="no packed rows (budgets on the padded path)")
    parser.add_argument("--reference-batch-size", type=int, default=64)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    task = load_task(args.task, args.data_dir)
    unique = list(dict.fromkeys(s for p in task.subsets.values() for s in (*p.sentences1, *p.sentences2)))
    unique = unique[:args.limit] if args.limit else unique
    path = resolve_model_path(args.model)
    encoders = {}
    for where, budget in settings(args.budgets, packed=not args.padded_only):
        size = args.reference_batch_size if (where, budget) == REFERENCE else None
        encoders[(where, budget)] = HFEncoder.from_pretrained(
            path, batch_size=size, max_tokens=budget, packing=where, precision=args.precision, device=args.device)
    first = next(iter(encoders.values()))
    tokens = sum(len(x) for x in first.tokenize(unique))
    if args.attention:
        cfg = first.model.config
        batch = budget_batch(first.tokenize(unique), args.attention)
        timed = attention_candidates(batch, cfg.num_attention_heads, cfg.hidden_size // cfg.num_attention_heads)
        print(f"attention of one layer over {len(batch)} random sentences ({sum(map(len, batch))} tokens), "
              f"median ms: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in timed.items()))
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
