"""SBERT-WK speed and parity: vectorised ``sbert_wk_pool`` vs the per-token numpy loop, same states.

The transformer runs once; both implementations then pool the *same* ``TokenBatch`` hidden states
in the same process, so the timing isolates the SBERT-WK step (the part we vectorised) and the
parity number compares the two on real model states. Prints seconds of each, the speed-up and the
max cosine distance between their sentence vectors.

    python -m benchmarks.sbert_wk_speed --model all-MiniLM-L6-v2 --data-dir /work/shared/data --n-sentences 500

(``python benchmarks/sbert_wk_speed.py ...`` works too.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

if not __package__:  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from benchmarks.sbert_wk_loop import sbert_wk_loop  # noqa: E402
from embeddings.encoders.hf import HFEncoder  # noqa: E402
from embeddings.encoders.load import load_encoder  # noqa: E402
from embeddings.encoders.token_batch import TokenBatch  # noqa: E402
from embeddings.methods.sbert_wk import sbert_wk_pool  # noqa: E402
from sts.tasks import load_task  # noqa: E402


def read_stsb_sentences(data_dir: Path, n: int) -> list[str]:
    """First ``n`` distinct sentences of STS-B dev, through the project's reader."""
    pairs = load_task("stsb-dev", data_dir).subsets["dev"]
    return list(dict.fromkeys(s for ab in zip(pairs.sentences1, pairs.sentences2, strict=True) for s in ab))[:n]


def collect_batches(encoder: HFEncoder, sentences: list[str]) -> list[TokenBatch]:
    """Run the model once and keep every ``TokenBatch`` it produced."""
    batches: list[TokenBatch] = []

    def keep(batch: TokenBatch) -> torch.Tensor:
        batches.append(batch)
        return torch.zeros(batch.attention_mask.shape[0], 1)

    encoder.encode(sentences, keep, show_progress=False)
    return batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("STS_DATA_DIR", "/work/shared/data")))
    parser.add_argument("--n-sentences", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--layer-start", type=int, default=4)
    parser.add_argument("--window", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="torch and BLAS threads for both sides")
    parser.add_argument("--repeats", type=int, default=5, help="runs of the vectorised pool (median)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    sentences = read_stsb_sentences(args.data_dir, args.n_sentences)
    encoder = load_encoder(args.model, batch_size=args.batch_size)
    batches = collect_batches(encoder, sentences)
    n_tokens = sum(int(b.lengths.sum()) for b in batches)
    arrays = [(torch.stack(b.hidden_states, 1).numpy(), b.attention_mask.numpy()) for b in batches]
    print(f"{len(sentences)} sentences, {n_tokens} tokens, {batches[0].num_layers} layers, "
          f"hidden {encoder.hidden_size}, layer_start={args.layer_start}, window={args.window}, "
          f"threads={args.threads}")

    def run_fast() -> list[torch.Tensor]:
        return [sbert_wk_pool(b, args.layer_start, args.window) for b in batches]

    with threadpool_limits(args.threads), torch.inference_mode():
        run_fast()  # warm-up
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            fast = run_fast()
            times.append(time.perf_counter() - t0)
        t_fast = statistics.median(times)
        t0 = time.perf_counter()
        slow = [sbert_wk_loop(x, m, args.layer_start, args.window) for x, m in arrays]
        t_loop = time.perf_counter() - t0

    a = torch.cat(fast).double()
    b = torch.from_numpy(np.concatenate(slow)).double()
    cos_dist = 1 - torch.nn.functional.cosine_similarity(a, b, dim=1)
    print(f"vectorised sbert_wk_pool: {t_fast:.4f} s (median of {args.repeats})")
    print(f"numpy loop sbert_wk_loop: {t_loop:.4f} s")
    print(f"speed-up: {t_loop / t_fast:.1f}x")
    print(f"max cosine distance: {cos_dist.max().item():.3e}; max abs diff: {(a - b).abs().max().item():.3e}")


if __name__ == "__main__":
    main()
