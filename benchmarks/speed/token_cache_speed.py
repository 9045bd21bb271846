"""A token-VAE epoch over CACHED frozen token states vs the same epoch RE-ENCODING with the frozen encoder.

Why: the token VAEs (Latte-Mix, Normal VAE, AE) train a small network on frozen token states, so
``TokenStateDataModule`` encodes the corpus once into a memory-mapped cache; this measures what that buys and costs.
Both epochs see the same sentences in the same seeded order and run the same step (``--step``: ``latte_mix``,
``mlp`` or ``auto``) from the same initial weights, alternating over ``--rounds`` (fastest epoch kept). Also printed:
the one-off cache build, its bytes on disk, and the peak RSS added by the cached epoch, loader alone and with the
step, split into file-backed pages (the memory map) and the rest.

    OMP_NUM_THREADS=1 python -m benchmarks.speed.token_cache_speed --data-dir ../shared/data --max-sentences 1000 \
        --threads 1
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable

os.environ.setdefault("WANDB_MODE", "disabled")

import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from sts_lightning.datamodules.token_states import TokenStateDataModule  # noqa: E402
from sts_lightning.embeddings.encoders.hf import resolve_device  # noqa: E402
from sts_lightning.embeddings.encoders.load import load_encoder  # noqa: E402
from sts_lightning.lightning_modules.latte_mix import LatteMixModule  # noqa: E402

Step = Callable[[dict], float]
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


# ------------------------------------------------------------------------------------------ the step
def make_step(kind: str, input_dim: int, args, device: torch.device) -> tuple[str, Step]:
    """A fresh model + Adam and the per-batch training step; the same seed gives the same start each time."""
    torch.manual_seed(args.seed)
    if kind in ("auto", "latte_mix"):
        module = LatteMixModule(model_name_or_path=args.model, layer=args.layer, max_length=args.max_length,
                                input_dim=input_dim).to(device).train()
        module.log = lambda *a, **k: None  # no trainer attached: logging is a no-op
        optimizer = torch.optim.Adam(module.parameters(), lr=module.hparams.lr)
        counter = iter(range(sys.maxsize))

        def vae_step(batch: dict) -> float:
            loss = module.training_step(batch, next(counter))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return float(loss.detach())

        hp = module.hparams
        return (f"LatteMixModule ({hp.latent}, D={hp.latent_dim}, K={hp.num_classes}, hidden {hp.hidden_dim}, "
                f"{hp.encoder_layers}+{hp.decoder_layers} layers)"), vae_step
    net = torch.nn.Sequential(torch.nn.Linear(input_dim, 256), torch.nn.GELU(), torch.nn.Linear(256, 64),
                              torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, input_dim)).to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)

    def mlp_step(batch: dict) -> float:
        tokens = batch["features"][batch["mask"]]
        loss = (net(tokens) - tokens).pow(2).sum(-1).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())

    return "2-layer MLP autoencoder (fallback)", mlp_step


# ------------------------------------------------------------------------------------------ memory
def rss() -> tuple[int, int]:
    """(resident bytes, of which file-backed or shared) now; (peak resident, 0) where /proc is missing."""
    try:
        with open("/proc/self/statm") as fh:
            _, resident, shared = (int(x) for x in fh.read().split()[:3])
        return resident * PAGE, shared * PAGE
    except OSError:
        scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale, 0


class PeakRSS:
    """Largest increase over the starting RSS seen by ``sample()`` (total and file-backed)."""

    def __init__(self) -> None:
        self.start = rss()
        self.total = self.file = 0

    def sample(self) -> None:
        now = rss()
        self.total = max(self.total, now[0] - self.start[0])
        self.file = max(self.file, now[1] - self.start[1])


# ------------------------------------------------------------------------------------------ epochs
def cached_epoch(datamodule: TokenStateDataModule, step: Step, device: torch.device) -> dict:
    peak, data_s, step_s, tokens = PeakRSS(), 0.0, 0.0, 0
    start = time.perf_counter()
    batches = iter(datamodule.train_dataloader())
    while True:
        t0 = time.perf_counter()
        batch = next(batches, None)
        if batch is None:
            break
        batch = {k: v.to(device) for k, v in batch.items()}
        t1 = time.perf_counter()
        step(batch)
        data_s, step_s = data_s + t1 - t0, step_s + time.perf_counter() - t1
        tokens += int(batch["mask"].sum())
        peak.sample()
    return {"seconds": time.perf_counter() - start, "data_s": data_s, "step_s": step_s, "tokens": tokens,
            "rss": peak}


def data_only_epoch(datamodule: TokenStateDataModule) -> dict:
    """The cached loader alone: what serving the memory map costs in time and resident memory."""
    peak, tokens = PeakRSS(), 0
    start = time.perf_counter()
    for batch in datamodule.train_dataloader():
        tokens += int(batch["mask"].sum())
        peak.sample()
    return {"seconds": time.perf_counter() - start, "tokens": tokens, "rss": peak}


def reencode_epoch(datamodule: TokenStateDataModule, encoder, layer: int, step: Step) -> dict:
    """The cached epoch's batches (same sampler, seed and batch size), encoded afresh every batch."""
    sentences = datamodule.sentences()
    order = DataLoader(range(len(sentences)), batch_size=datamodule.batch_size, shuffle=datamodule.shuffle,
                       generator=torch.Generator().manual_seed(int(datamodule.seed)))
    data_s, step_s, tokens = 0.0, 0.0, 0
    start = time.perf_counter()
    for rows in order:
        t0 = time.perf_counter()
        with torch.no_grad():  # not inference_mode: its tensors may not enter the VAE's autograd graph
            out = encoder.forward_ids(encoder.tokenize([sentences[i] for i in rows.tolist()]))
        batch = {"features": out.hidden_states[layer].float(), "mask": out.attention_mask.bool()}
        t1 = time.perf_counter()
        step(batch)
        data_s, step_s = data_s + t1 - t0, step_s + time.perf_counter() - t1
        tokens += int(batch["mask"].sum())
    return {"seconds": time.perf_counter() - start, "data_s": data_s, "step_s": step_s, "tokens": tokens}


def mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--data-dir", default=os.environ.get("STS_DATA_DIR"))
    parser.add_argument("--files", default="nli:snli:dev", help="comma-separated sources (nli:<source> or files)")
    parser.add_argument("--max-sentences", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--layer", type=int, default=-1)
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    parser.add_argument("--step", default="auto", choices=("auto", "latte_mix", "mlp"))
    parser.add_argument("--cache-dir", default=None, help="default: a temporary directory, deleted at the end")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto (encoder and step)")
    parser.add_argument("--rounds", type=int, default=2, help="epochs per side, alternating; the fastest is kept")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.WARNING)
    device = resolve_device(args.device)

    with tempfile.TemporaryDirectory(prefix="token_cache_speed.") as tmp:
        datamodule = TokenStateDataModule(
            args.data_dir, files=args.files.split(","), model_name_or_path=args.model, layer=args.layer,
            max_length=args.max_length, batch_size=args.batch_size, cache_dir=args.cache_dir or tmp,
            max_sentences=args.max_sentences, dtype=args.dtype, seed=args.seed, shuffle=True,
            encode_batch_size=64, encode_device=str(device))
        n = len(datamodule.sentences())
        t0 = time.perf_counter()
        datamodule.prepare_data()  # encodes unless --cache-dir already holds this cache
        build_s = time.perf_counter() - t0
        datamodule.setup("fit")
        dim, cache_bytes, num_tokens = datamodule.feature_dim, datamodule.cache_bytes(), datamodule.num_tokens

        data_only = data_only_epoch(datamodule)  # first pass over the map: its page faults land here
        encoder = load_encoder(args.model, max_length=args.max_length, batch_size=args.batch_size, device=str(device))
        model = getattr(encoder, "model", None)
        if isinstance(model, torch.nn.Module):
            model.eval().requires_grad_(False)
        runs: dict[str, list[dict]] = {"cached": [], "fresh": []}
        for r in range(args.rounds):  # alternate which side goes first, so warm-up and noise hit both
            for side in ("cached", "fresh") if r % 2 == 0 else ("fresh", "cached"):
                step_name, step = make_step(args.step, dim, args, device)
                runs[side].append(cached_epoch(datamodule, step, device) if side == "cached"
                                  else reencode_epoch(datamodule, encoder, args.layer, step))
        cached, fresh = (min(runs[side], key=lambda run: run["seconds"]) for side in ("cached", "fresh"))
    if not cached["tokens"] == fresh["tokens"] == data_only["tokens"] == num_tokens:
        raise SystemExit(f"token counts differ: cached {cached['tokens']}, re-encoded {fresh['tokens']}, "
                         f"data only {data_only['tokens']}, cache {num_tokens}")

    print(f"\n{args.model}, layer {args.layer}, files {args.files}: {n} sentences, {num_tokens} tokens x {dim}, "
          f"batch {args.batch_size}, {args.threads} thread(s), device {device}, fastest of {args.rounds} epoch(s) a side")
    print(f"step: {step_name}\n")
    print("| epoch | seconds | data s | step s | sentences/s | speed-up |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, r in (("cached token states", cached), (f"re-encoding ({args.model})", fresh)):
        print(f"| {label} | {r['seconds']:.2f} | {r['data_s']:.2f} | {r['step_s']:.2f} | {n / r['seconds']:.0f} | "
              f"{fresh['seconds'] / r['seconds']:.1f}x |")
    print("\n| cache | value |\n|---|---:|")
    print(f"| one-off build (tokenize + encode + write){' (reused)' if args.cache_dir and build_s < 1 else ''} | "
          f"{build_s:.2f} s |")
    print(f"| bytes on disk ({args.dtype}) | {cache_bytes:,} ({mib(cache_bytes)}; {cache_bytes / num_tokens:.0f} "
          f"B/token) |")
    for label, peak in (("iterating the cached epoch, data only", data_only["rss"]),
                        ("first cached training epoch, step included", runs["cached"][0]["rss"])):
        print(f"| peak RSS increase, {label} | {mib(peak.total)} (file-backed {mib(peak.file)}, "
              f"other {mib(peak.total - peak.file)}) |")
    print(f"| data-only pass over the cache | {data_only['seconds']:.2f} s |")
    print(f"| (build + cached epoch) / re-encoding epoch | {(build_s + cached['seconds']) / fresh['seconds']:.2f} |")


if __name__ == "__main__":
    main()
