"""Encoding speed: our ``HFEncoder`` vs ``SentenceTransformer.encode``, same model/batch/threads, one run.

Prints, for the STS-B dev sentences: sentences/s of each, the speed ratio (ours / theirs) on the
raw list (duplicates included: our de-duplication is part of the product) and on the de-duplicated
list (pure engine speed), the max absolute difference of the (L2-normalised) embeddings, and our
achieved model FLOP/s as a fraction of a plain fp32 matmul measured in the same process.

    python -m benchmarks.encode_speed --model all-MiniLM-L6-v2 --data-dir ../shared/data
    python -m benchmarks.encode_speed --precision bf16    # ours in bf16 vs sentence-transformers in fp32
    python -m benchmarks.encode_speed --device cuda --model <dir>   # both on the GPU (timed to the last kernel)

The last line, ``ratio_vs_sentence_transformers_fp32 X.XX``, is the de-duplicated speed ratio; the line before
it compares the STS Spearman of both (the bf16 path must stay within 0.1 of fp32).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from benchmarks.cpu_features import cpu_line
from benchmarks.device_timing import CPU, device_line, synchronize
from sts_lightning.embeddings.encoders.hf import HFEncoder
from sts_lightning.embeddings.encoders.packaged import resolve_model_path
from sts_lightning.embeddings.methods.pooling import mean_pool
from sts_lightning.sts.tasks import load_task


def model_flops(encoder: HFEncoder, ids: list[list[int]], batch_size: int) -> float:
    """Multiply-add FLOPs of the transformer layers over padded, length-sorted batches (as encoded)."""
    cfg = encoder.model.config
    h, inter, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    lengths = sorted((len(x) for x in ids), reverse=True)
    total = 0.0
    for start in range(0, len(lengths), batch_size):
        chunk = lengths[start : start + batch_size]
        t, b = chunk[0], len(chunk)
        dense = 2 * t * (4 * h * h + 2 * h * inter)  # QKV+output projections, FFN in/out
        attention = 2 * 2 * t * t * h  # scores and weighted sum
        total += b * layers * (dense + attention)
    return total


def matmul_flops_per_s(n: int = 1024, repeats: int = 20, device: torch.device = CPU) -> float:
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    torch.mm(a, b)
    synchronize(device)
    t0 = time.perf_counter()
    for _ in range(repeats):
        torch.mm(a, b)
    synchronize(device)
    return 2 * n**3 * repeats / (time.perf_counter() - t0)


def alternating(fns: dict, repeats: int, device: torch.device = CPU) -> tuple[dict, dict]:
    """Median seconds and last output of each function, run in turn (a, b, a, b, ...) so drift hits all alike."""
    times: dict = {k: [] for k in fns}
    outs: dict = {}
    for _ in range(repeats):
        for key, fn in fns.items():
            synchronize(device)
            t0 = time.perf_counter()
            outs[key] = fn()
            synchronize(device)
            times[key].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}, outs


def stsb_spearman(encode, task) -> float:
    """Spearman x100 of cosine similarities on every subset of ``task`` pooled (what evaluate.py reports)."""
    from scipy.stats import spearmanr

    pairs = list(task.subsets.values())
    s1 = [s for p in pairs for s in p.sentences1]
    s2 = [s for p in pairs for s in p.sentences2]
    gold = [g for p in pairs for g in p.scores]
    a, b = encode(s1), encode(s2)
    return 100 * float(spearmanr((a * b).sum(-1).cpu().numpy(), gold).correlation)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--data-dir", default=None, help="STS data dir (default: $STS_DATA_DIR)")
    parser.add_argument("--task", default="stsb-dev")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"],
                        help="our encoder's precision (sentence-transformers always runs its fp32 default)")
    parser.add_argument("--device", default="cpu", help="cpu | cuda | auto: both encoders run there")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from sentence_transformers import SentenceTransformer

    task = load_task(args.task, args.data_dir)
    sentences = [s for p in task.subsets.values() for s in (*p.sentences1, *p.sentences2)]
    unique = list(dict.fromkeys(sentences))
    path = resolve_model_path(args.model)
    ours = HFEncoder.from_pretrained(path, batch_size=args.batch_size, precision=args.precision, device=args.device)
    device = ours.device
    st = SentenceTransformer(path, device=str(device))
    st.max_seq_length = ours.max_length

    def run_ours(xs):
        return torch.nn.functional.normalize(ours.encode(xs, mean_pool, show_progress=False).float().cpu(), dim=-1)

    def run_st(xs):
        out = st.encode(xs, batch_size=args.batch_size, convert_to_tensor=True, show_progress_bar=False)
        return torch.nn.functional.normalize(out.float().cpu(), dim=-1)

    run_ours(unique[:128]), run_st(unique[:128])  # warm-up
    rows = []
    for label, xs in (("raw list", sentences), ("de-duplicated", unique)):
        times, outs = alternating({"st": lambda xs=xs: run_st(xs), "ours": lambda xs=xs: run_ours(xs)}, args.repeats,
                                  device)
        diff = (outs["ours"] - outs["st"]).abs().max().item()
        rows.append((label, len(xs), len(xs) / times["ours"], len(xs) / times["st"], times["st"] / times["ours"], diff))
    flops = model_flops(ours, ours.tokenize(unique), args.batch_size)
    dedup = next(r for r in rows if r[0] == "de-duplicated")
    achieved = flops / (dedup[1] / dedup[2])
    peak = matmul_flops_per_s(device=device)
    print(cpu_line())  # figures move with the CPU kind (AVX2 / AVX-512), also where the GPU does the work
    print(f"model {args.model}, task {args.task}, batch {args.batch_size}, {device_line(device)}, threads {args.threads}, "
          f"ours {ours.precision} vs sentence-transformers fp32, median of {args.repeats} alternating runs")
    print("| input | sentences | ours sent/s | sentence-transformers sent/s | ratio (ours/ST) | max abs diff |")
    print("|---|---|---|---|---|---|")
    for label, n, ours_sps, st_sps, ratio, diff in rows:
        print(f"| {label} | {n} | {ours_sps:.1f} | {st_sps:.1f} | {ratio:.2f}x | {diff:.2e} |")
    print(f"our model FLOP/s: {achieved / 1e9:.1f} GFLOP/s = {achieved / peak:.2f} of fp32 matmul "
          f"({peak / 1e9:.1f} GFLOP/s, 1024^3 torch.mm, same process)")
    ours_score = stsb_spearman(run_ours, task)
    st_score = stsb_spearman(run_st, task)
    print(f"{args.task} Spearman x100: ours {ours.precision} {ours_score:.3f}, sentence-transformers fp32 "
          f"{st_score:.3f} (difference {ours_score - st_score:+.3f})")
    print(f"ratio_vs_sentence_transformers_fp32 {dedup[4]:.2f}")


if __name__ == "__main__":
    main()
