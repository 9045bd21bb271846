"""Peak memory and speed of one big in-batch step: uncached vs cached (GradCache) vs gradient checkpointing.

One optimizer step of ``model=sbert_nli model.objective=mnrl`` (dropout on) on ``--batch`` SNLI triplets, in four
variants: ``uncached``, ``cached`` (``model.mini_batch_size=--mini-batch``), ``checkpointing``
(``model.gradient_checkpointing=true``) and both. Each runs in a fresh subprocess, so no two share a high-water mark.
Memory is what a timed step adds at its peak: on a CPU ``VmHWM`` (reset through ``/proc/self/clear_refs``) over the
resident set before, with ``MALLOC_MMAP_THRESHOLD_=131072`` so freed activations leave the resident set; on CUDA
``max_memory_allocated`` over the allocation before. Speed: 1 / median step time. The cached variants compute the
same gradients (tests/embeddings/methods/shared/test_grad_cache.py); their losses differ only by dropout's masks.

    python -m benchmarks.speed.cached_loss_memory --batch 512 --mini-batch 32 --steps 3 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from benchmarks.tools.cpu_features import cpu_line
from sts_lightning.datamodules.nli_readers import load_source
from sts_lightning.datamodules.nli_triplets import build_triplets
from sts_lightning.lightning_modules.optimizers import adam
from sts_lightning.lightning_modules.sbert_nli import SBERTNLIModule

VARIANTS = {"uncached": {}, "cached": {"mini": True}, "checkpointing": {"gc": True},
            "cached+checkpointing": {"mini": True, "gc": True}}


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        return True
    except OSError:
        return False


def worker(args: argparse.Namespace) -> dict:
    """One variant in this (fresh) process; returns its numbers as a dict."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    flags = VARIANTS[args.worker]
    module = SBERTNLIModule(args.model, objective="mnrl", max_length=args.max_length,
                            mini_batch_size=args.mini_batch if flags.get("mini") else None,
                            gradient_checkpointing=bool(flags.get("gc"))).to(args.device)
    module.encoder_model.train()
    triplets = build_triplets([load_source(s, args.data_dir) for s in ("snli:dev", "snli:test")])
    n = args.batch
    batches = [{"anchors": triplets.anchors[i:i + n], "positives": triplets.positives[i:i + n],
                "negatives": triplets.negatives[i:i + n]} for i in range(0, n * (args.steps + 1), n)]
    optimizer = adam(module._param_groups(), lr=2e-5, decoupled=True)
    cuda = args.device == "cuda"

    def step(batch: dict) -> float:
        loss = module._mnrl_step(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        return float(loss)

    losses = [step(batches[0])]  # warm-up: optimizer state, allocator caches, lazy inits
    base = torch.cuda.memory_allocated() if cuda else _rss_kib("VmRSS") * 1024
    reset = torch.cuda.reset_peak_memory_stats() is None if cuda else _reset_peak()
    times = []
    for batch in batches[1:]:
        start = time.perf_counter()
        losses.append(step(batch))
        times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() if cuda else _rss_kib("VmHWM") * 1024
    return {"variant": args.worker, "peak_added_mib": (peak - base) / 2**20, "base_mib": base / 2**20,
            "peak_reset": reset, "steps_per_s": 1 / statistics.median(times), "losses": losses}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="paraphrase-MiniLM-L3-v2")
    parser.add_argument("--data-dir", default=os.environ.get("STS_DATA_DIR"))
    parser.add_argument("--batch", type=int, default=512, help="triplets per step (3x sentences)")
    parser.add_argument("--mini-batch", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up step")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--worker", choices=tuple(VARIANTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    print(cpu_line())
    results = {}
    for variant in args.variants.split(","):
        cmd = [sys.executable, "-m", "benchmarks.speed.cached_loss_memory", "--worker", variant, "--model", args.model,
               "--batch", str(args.batch), "--mini-batch", str(args.mini_batch), "--steps", str(args.steps),
               "--threads", str(args.threads), "--device", args.device,
               *(["--data-dir", args.data_dir] if args.data_dir else []),
               *(["--max-length", str(args.max_length)] if args.max_length else [])]
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        if done.returncode:
            sys.exit(f"{variant} failed:\n{done.stderr[-3000:]}")
        results[variant] = json.loads(done.stdout.strip().splitlines()[-1])
        r = results[variant]
        print(f"{variant:22s} peak added {r['peak_added_mib']:8.1f} MiB (base {r['base_mib']:.0f} MiB"
              f"{'' if r['peak_reset'] else ', LIFETIME peak: no clear_refs'})  {r['steps_per_s']:.3f} steps/s  "
              f"losses {' '.join(f'{x:.5f}' for x in r['losses'])}", flush=True)
    ref = results.get("uncached")
    if ref:
        for variant, r in results.items():
            if variant != "uncached":
                print(f"ratio {variant} vs uncached ({args.device}, batch {args.batch}, mini-batch {args.mini_batch}): "
                      f"peak memory x{r['peak_added_mib'] / ref['peak_added_mib']:.3f}, "
                      f"speed x{r['steps_per_s'] / ref['steps_per_s']:.3f}")


if __name__ == "__main__":
    main()
