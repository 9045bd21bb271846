"""Token-VAE epoch over the cached token states vs the same epoch re-encoding with the frozen encoder.

Both sides run the same VAE (``TokenVAEModule``, paper defaults) on the same sentences in the same
batches, in the same process, one after the other (cached first, then re-encoding, then cached again to
expose drift): a step is ``losses`` + ``backward`` + ``Adam.step``; the re-encoding side first runs the
frozen encoder on the batch (``inference_mode``) and takes the layer. Reported: seconds per epoch, the
ratio, the cache's bytes on disk and the resident memory (VmRSS) before and after the cached epoch (the
memory map's pages count when touched; the page cache shares them between processes).

    python -m benchmarks.token_cache_speed --model all-MiniLM-L6-v2 --max-sentences 2000 --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("WANDB_MODE", "disabled")

import torch  # noqa: E402


def rss_mib() -> float:
    """Resident set size of this process (Linux ``/proc``), MiB."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def vae_step(module, optimizer, features: torch.Tensor, mask: torch.Tensor) -> None:
    loss = module.losses(features, mask)["loss"]
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--files", default="nli:snli:dev")
    parser.add_argument("--max-sentences", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from datamodules.token_states import TokenStateDataModule, collate_token_states
    from embeddings.load_encoder import load_encoder
    from lightning_modules.token_vae import TokenVAEModule

    dm = TokenStateDataModule(data_dir=args.data_dir, files=args.files.split(","), model_name_or_path=args.model,
                              batch_size=args.batch_size, cache_dir=args.cache_dir, max_sentences=args.max_sentences,
                              shuffle=False, encode_device="cpu")
    t0 = time.perf_counter()
    dm.prepare_data()
    build_s = time.perf_counter() - t0
    dm.setup("fit")
    sentences = dm.sentences()
    encoder = load_encoder(args.model, batch_size=args.batch_size)
    torch.manual_seed(0)
    module = TokenVAEModule(args.model, input_dim=dm.feature_dim)
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
    batches = [list(range(i, min(i + args.batch_size, len(sentences)))) for i in range(0, len(sentences), args.batch_size)]

    def cached_epoch() -> float:
        start = time.perf_counter()
        for rows in batches:
            b = collate_token_states([dm.dataset[i] for i in rows])
            vae_step(module, optimizer, b["features"], b["mask"])
        return time.perf_counter() - start

    def encoding_epoch() -> float:
        start = time.perf_counter()
        for rows in batches:
            with torch.inference_mode():
                tb = encoder.forward_ids(encoder.tokenize([sentences[i] for i in rows]))
            features = tb.hidden_states[-1].clone()
            vae_step(module, optimizer, features, tb.attention_mask.bool())
        return time.perf_counter() - start

    rss_before = rss_mib()
    cached1 = cached_epoch()
    rss_after = rss_mib()
    encoding = encoding_epoch()
    cached2 = cached_epoch()
    cached = (cached1 + cached2) / 2
    print(f"\n{args.model}, {len(sentences)} sentences ({dm.num_tokens} tokens x {dm.feature_dim}), batch "
          f"{args.batch_size}, {args.threads} threads, CPU; one-off cache build {build_s:.1f}s (0 if it existed)")
    print("| epoch | seconds | ratio |\n|---|---|---|")
    print(f"| VAE over cached token states (mean of 2: {cached1:.1f}, {cached2:.1f}) | {cached:.1f} | 1.00x |")
    print(f"| VAE re-encoding with the frozen encoder | {encoding:.1f} | {encoding / cached:.2f}x slower |")
    print(f"\ncache on disk: {dm.cache_bytes() / 2**20:.1f} MiB; process RSS {rss_before:.0f} -> {rss_after:.0f} MiB "
          "across the cached epoch")


if __name__ == "__main__":
    main()
