"""Where our training step's time goes, op by op: fp32 against bf16-mixed, one forward group against two.

Why: a step time alone does not say why a precision or a method is slow. Per setting this prints the phases of a
step (forward + loss, backward, optimizer), the kernels and host syncs a step makes (on a GPU), the operators it
dispatches and autocast's casts, the attention kernel, and the profiler's op table by self time. Batches come
tokenized, as the DataLoader's workers make them. ``--groups`` forces the number of length-sorted forward passes
(our modules pick ``length_buckets`` on a CPU and 1 on a GPU: ``EncoderModule.forward_groups``).

    python -m benchmarks.speed.train_profile --method nli --model paraphrase-MiniLM-L3-v2 --batch-size 64
    python -m benchmarks.speed.train_profile --method ct --device cuda --model <random BERT-base dir> --groups 1,2
"""

from __future__ import annotations

import argparse
import os
import statistics

os.environ.setdefault("WANDB_MODE", "disabled")

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from benchmarks.speed.train_batches import make_batches  # noqa: E402
from benchmarks.speed.train_sides import Ours  # noqa: E402
from benchmarks.tools.device_timing import device_line  # noqa: E402
from sts_lightning.embeddings.encoders.packaged import resolve_model_path  # noqa: E402

MAX_LENGTH = {"nli": 128, "ct": 75, "simcse": 32}
ATTENTION_OPS = ("cudnn_attention", "flash_attention", "efficient_attention", "_scaled_dot_product_attention_math")
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpy", "cudaEventSynchronize")


def tokenized(module, batches: list[dict]) -> list[dict]:
    """The batches as a training loader hands them over: with the workers' token ids (``batch_tokenizer``)."""
    tokenizer = module.batch_tokenizer()
    return [tokenizer(batch) for batch in batches]


def side(method: str, path: str, batch_size: int, precision: str, groups: int, device: torch.device) -> Ours:
    """train_speed's side of ours (same module, optimizer and timed phases), with ``groups`` forward passes."""
    torch.manual_seed(0)  # every setting starts from the same weights
    ours = Ours(method, path, MAX_LENGTH[method], batch_size, autocast=precision != "32", device=device)
    ours.module.forward_groups = lambda: groups  # instance attribute: the module's own choice, overridden
    return ours


def op_table(step, batches: list[dict], device: torch.device, rows: int) -> tuple[str, dict[str, float]]:
    """The profiler's table over ``batches`` (whole steps) and per-step counts: kernels, host syncs, attention ops."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for i, batch in enumerate(batches):
            step(batch, i)
    events = prof.key_averages()
    per_step = len(batches)
    counts = {"kernels": sum(e.count for e in events if e.key in ("cudaLaunchKernel", "cuLaunchKernel",
                                                                   "cudaLaunchKernelExC")) / per_step,
              "host syncs": sum(e.count for e in events if e.key.startswith(SYNC_CALLS)) / per_step,
              # operators dispatched (every level), and autocast's casts among them: what a host-bound step pays for
              "aten calls": sum(e.count for e in events if e.key.startswith("aten::")) / per_step,
              "casts": sum(e.count for e in events if e.key == "aten::_to_copy") / per_step}
    for e in events:
        for name in ATTENTION_OPS:
            if name in e.key and e.key.startswith("aten::"):
                counts[e.key] = e.count / per_step
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return events.table(sort_by=sort, row_limit=rows), counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", default="nli", choices=sorted(MAX_LENGTH))
    parser.add_argument("--model", default="paraphrase-MiniLM-L3-v2")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--nli-source", default="snli:dev")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--precisions", default="32,bf16-mixed")
    parser.add_argument("--groups", default=None, help="forward groups to compare, e.g. 1,2 (default: the module's)")
    parser.add_argument("--steps", type=int, default=6, help="timed steps per setting")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--profile-steps", type=int, default=2)
    parser.add_argument("--rows", type=int, default=15)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    path = resolve_model_path(args.model)
    n = args.warmup + args.steps + args.profile_steps
    raw = make_batches(args.method, args.data_dir, args.nli_source, n, args.batch_size, wiki=False)
    own = side(args.method, path, args.batch_size, "32", 1, device).module
    batches = tokenized(own, raw)
    own = own.length_buckets if device.type == "cpu" else 1
    groups = [int(g) for g in args.groups.split(",")] if args.groups else [own]
    print(f"{args.method}, model {args.model}, batch {args.batch_size}, max length {MAX_LENGTH[args.method]}, "
          f"{device_line(device)}, threads {args.threads}, torch {torch.__version__}; the module's own groups here: {own}")
    summary = []
    for precision in args.precisions.split(","):
        for g in groups:
            step = side(args.method, path, args.batch_size, precision, g, device).step
            for i, batch in enumerate(batches[:args.warmup]):
                step(batch, i)
            times = [step(batch, i) for i, batch in enumerate(batches[args.warmup:args.warmup + args.steps])]
            table, counts = op_table(step, batches[args.warmup + args.steps:], device, args.rows)
            med = {k: 1000 * statistics.median(t[k] for t in times) for k in times[0]}
            summary.append((precision, g, med, counts))
            print(f"\n=== {precision}, {g} forward group(s): op table over {args.profile_steps} steps ===\n{table}")
    print("\n| precision | groups | step ms | forward+loss | backward | optimizer | per step: kernels, host syncs, aten calls, casts, attention ops |")
    print("|---|---|---|---|---|---|---|")
    for precision, g, med, counts in summary:
        extra = ", ".join(f"{k} {v:g}" for k, v in counts.items())
        print(f"| {precision} | {g} | {med['total']:.1f} | {med['forward+loss']:.1f} | {med['backward']:.1f} | "
              f"{med['optimizer']:.1f} | {extra} |")


if __name__ == "__main__":
    main()
