"""Where our training step's time goes, op by op: fp32 against bf16-mixed, one forward group against two.

Why (issue 39): on an H200 SBERT-NLI's step got SLOWER in bf16-mixed (209 ms against 82.6 ms in fp32) and CT's
forward + loss took 66 ms against sentence-transformers' 29. A step time alone does not say why; this prints,
for each setting, the phases of a step (forward + loss, backward, optimizer), the kernels launched and the host
syncs a step makes (on a GPU), which attention kernel ran, and the profiler's op table sorted by self time
(device time on a GPU, CPU time on a CPU). Batches come tokenized, as the DataLoader's workers make them, so the
step holds no tokenizer time. ``--groups`` forces the length-sorted forward passes per embedded list (our
modules pick ``length_buckets`` on a CPU and 1 on a GPU: ``EncoderModule.forward_groups``).

    python -m benchmarks.train_profile --method nli --model paraphrase-MiniLM-L3-v2 --batch-size 64
    python -m benchmarks.train_profile --method ct --device cuda --model <random BERT-base dir> --groups 1,2
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("WANDB_MODE", "disabled")

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from benchmarks.device_timing import device_line, synchronize  # noqa: E402
from benchmarks.train_speed import make_batches, make_optimizer  # noqa: E402
from sts_lightning.datamodules.nli_readers import load_source  # noqa: E402
from sts_lightning.embeddings.encoders.packaged import resolve_model_path  # noqa: E402
from sts_lightning.lightning_modules.ct import ContrastiveTensionModule  # noqa: E402
from sts_lightning.lightning_modules.sbert_nli import SBERTNLIModule  # noqa: E402
from sts_lightning.lightning_modules.simcse import SimCSEModule  # noqa: E402

MAX_LENGTH = {"nli": 128, "ct": 75, "simcse": 32}
ATTENTION_OPS = ("cudnn_attention", "flash_attention", "efficient_attention", "_scaled_dot_product_attention_math")
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpy", "cudaEventSynchronize")


def build(method: str, path: str, batch_size: int):
    if method == "nli":
        return SBERTNLIModule(path, pooling="mean", max_length=MAX_LENGTH[method])
    if method == "simcse":
        return SimCSEModule(path, pooling="mean", mlp="none", max_length=MAX_LENGTH[method], dropout=0.1)
    return ContrastiveTensionModule(path, pooling="mean", max_length=MAX_LENGTH[method], pairs=batch_size, positives=2)


def tokenized(module, batches: list[dict]) -> list[dict]:
    """The batches as a training loader hands them over: with the workers' token ids (``batch_tokenizer``)."""
    tokenizer = module.batch_tokenizer()
    return [tokenizer(batch) for batch in batches]


class Step:
    """One training step of ``module`` in ``precision`` with ``groups`` forward passes per embedded list."""

    def __init__(self, module, method: str, precision: str, groups: int, device: torch.device):
        self.module, self.device, self.autocast = module, device, precision != "32"
        module.forward_groups = lambda: groups  # instance attribute: the module's own choice, overridden
        self.opt = make_optimizer(method, module)  # train_speed's: AdamW for NLI / SimCSE, RMSprop for CT

    def __call__(self, batch: dict) -> dict[str, float]:
        synchronize(self.device)
        t0 = time.perf_counter()
        batch = {k: v.to(self.device, non_blocking=True) if torch.is_tensor(v) else v for k, v in batch.items()}
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            loss = self.module.training_step(batch, 0)
        synchronize(self.device)
        t1 = time.perf_counter()
        loss.backward()
        synchronize(self.device)
        t2 = time.perf_counter()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        synchronize(self.device)
        t3 = time.perf_counter()
        return {"forward+loss": t1 - t0, "backward": t2 - t1, "optimizer": t3 - t2, "total": t3 - t0}


def op_table(step: Step, batches: list[dict], device: torch.device, rows: int) -> tuple[str, dict[str, float]]:
    """The profiler's table over ``batches`` (whole steps) and per-step counts: kernels, host syncs, attention ops."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for batch in batches:
            step(batch)
    events = prof.key_averages()
    per_step = len(batches)
    counts = {"kernels": sum(e.count for e in events if e.key in ("cudaLaunchKernel", "cuLaunchKernel",
                                                                   "cudaLaunchKernelExC")) / per_step,
              "host syncs": sum(e.count for e in events if e.key.startswith(SYNC_CALLS)) / per_step}
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
    data = load_source(args.nli_source, args.data_dir)
    n = args.warmup + args.steps + args.profile_steps
    raw = make_batches(args.method, data, n, args.batch_size)
    torch.manual_seed(0)
    module = build(args.method, path, args.batch_size).to(device)
    module.log = lambda *a, **k: None  # no trainer
    module.train()
    batches = tokenized(module, raw)
    own = module.length_buckets if device.type == "cpu" else 1
    groups = [int(g) for g in args.groups.split(",")] if args.groups else [own]
    print(f"{args.method}, model {args.model}, batch {args.batch_size}, max length {MAX_LENGTH[args.method]}, "
          f"{device_line(device)}, threads {args.threads}, torch {torch.__version__}; the module's own groups here: {own}")
    summary = []
    for precision in args.precisions.split(","):
        for g in groups:
            step = Step(module, args.method, precision, g, device)
            for batch in batches[:args.warmup]:
                step(batch)
            times = [step(batch) for batch in batches[args.warmup:args.warmup + args.steps]]
            table, counts = op_table(step, batches[args.warmup + args.steps:], device, args.rows)
            med = {k: 1000 * statistics.median(t[k] for t in times) for k in times[0]}
            summary.append((precision, g, med, counts))
            print(f"\n=== {precision}, {g} forward group(s): op table over {args.profile_steps} steps ===\n{table}")
    print("\n| precision | groups | step ms | forward+loss | backward | optimizer | per step: kernels, host syncs, attention ops |")
    print("|---|---|---|---|---|---|---|")
    for precision, g, med, counts in summary:
        extra = ", ".join(f"{k} {v:g}" for k, v in counts.items())
        print(f"| {precision} | {g} | {med['total']:.1f} | {med['forward+loss']:.1f} | {med['backward']:.1f} | "
              f"{med['optimizer']:.1f} | {extra} |")


if __name__ == "__main__":
    main()
