"""Encoding speed: our ``HFEncoder`` vs ``SentenceTransformer.encode``, like for like, same process, alternating.

sentence-transformers runs in our precision (``--peer-precision`` changes it) at the fastest of
``--peer-batch-sizes``; ours at its defaults (``--batch-size`` and ``--ours-kwargs`` go to ``HFEncoder.from_pretrained``).
Per precision: sentences/s and real tokens/s of each side and the ratio, on the raw list (duplicates included: our
de-duplication is part of the product) and de-duplicated (``--wiki N``: N distinct Wikipedia sentences instead),
the largest difference of the normalised embeddings, MFU (``tools/mfu.py``), idle fraction and peak memory (one more
metered pass, ``tools/device_meter.py``) and both sides' STS Spearman.

    python -m benchmarks.speed.encode_speed --precision fp32                     # the CPU reference: all-MiniLM-L6-v2
    python -m benchmarks.speed.encode_speed --precision bf16 --peer-precision fp32   # ours bf16 vs their fp32 default
    python -m benchmarks.speed.encode_speed --device cuda --size bert-base --precision fp32,bf16,fp16 --wiki 20000

The last lines, ``ratio_vs_sentence_transformers_<peer precision> X.XX``, are the de-duplicated speed ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from benchmarks.gpu.gpu_figures import append_record
from benchmarks.speed.train_batches import wiki_sentences
from benchmarks.tools.bench_models import add_model_args, model_from_args, parse_kwargs
from benchmarks.tools.cpu_features import cpu_line
from benchmarks.tools.device_meter import metered
from benchmarks.tools.device_timing import CPU, device_line, synchronize
from benchmarks.tools.mfu import dtype_of, forward_flops, matmul_peak, peak_label
from sts_lightning.embeddings.encoders.hf import HFEncoder, resolve_device
from sts_lightning.embeddings.encoders.precision import resolve_precision
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.pooling import mean_pool
from sts_lightning.sts.tasks import load_task


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


def load_ours(path: str, precision: str, device: str, kwargs: dict) -> HFEncoder:
    try:
        return HFEncoder.from_pretrained(path, precision=precision, device=device, **kwargs)
    except TypeError as err:  # an option this encoder does not take (yet)
        raise ConfigError(f"--ours-kwargs / --reference-kwargs {kwargs}: {err}") from None


def load_peer(path: str, device: torch.device, precision: str, max_length: int):
    """sentence-transformers in ``precision``, cast as its users do (``model.bfloat16()`` / ``model.half()``)."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(path, device=str(device))
    st.max_seq_length = max_length
    if precision == "bf16":
        return st.bfloat16()  # in place, as nn.Module casts are: never build the three in one dict
    return st.half() if precision == "fp16" else st


def encoders(ours: HFEncoder, st, batch_size: int):
    def run_ours(xs):
        return torch.nn.functional.normalize(ours.encode(xs, mean_pool, show_progress=False).float().cpu(), dim=-1)

    def run_st(xs, model=st, bs=batch_size):
        out = model.encode(xs, batch_size=bs, convert_to_tensor=True, show_progress_bar=False)
        return torch.nn.functional.normalize(out.float().cpu(), dim=-1)

    return run_ours, run_st


def best_batch(run_st, xs: list[str], sizes: list[int], device: torch.device) -> tuple[int, dict]:
    """sentence-transformers' fastest batch size of ``sizes`` on ``xs`` (one timed pass each) and every time."""
    times = {}
    for bs in sizes:
        synchronize(device)
        t0 = time.perf_counter()
        run_st(xs, bs=bs)
        synchronize(device)
        times[bs] = time.perf_counter() - t0
    return min(times, key=times.get), times


def compare(precision: str, path: str, label: str, task, speed_sets: list, args) -> dict:
    """One precision: ours vs sentence-transformers on every speed set; prints the block, returns the record."""
    device = resolve_device(args.device)
    batch = {"batch_size": args.batch_size}  # None: the token budget evaluate.py encodes with (encoder.max_tokens)
    ours = load_ours(path, precision, args.device, {**batch, **parse_kwargs(args.ours_kwargs)})
    peer_precision = resolve_precision(ours.precision if args.peer_precision == "same" else args.peer_precision, device)
    st = load_peer(path, device, peer_precision, ours.max_length)
    sizes = [int(b) for b in args.peer_batch_sizes.split(",")]
    run_ours, run_st = encoders(ours, st, sizes[0])
    main_set = speed_sets[-1][1]
    run_ours(main_set[:256]), run_st(main_set[:256])  # warm-up: kernels, allocator, thread pools
    search_set = main_set[: args.peer_search_sentences]
    st_batch, search = best_batch(run_st, search_set, sizes, device) if len(sizes) > 1 else (sizes[0], {})
    run_ours, run_st = encoders(ours, st, st_batch)
    fns = {"st": run_st, "ours": run_ours}
    if args.extra_fp32_peer and peer_precision != "fp32":
        fns["st_fp32"] = encoders(ours, load_peer(path, device, "fp32", ours.max_length), st_batch)[1]
    rows = []
    for name, xs in speed_sets:
        times, outs = alternating({k: (lambda f=f, xs=xs: f(xs)) for k, f in fns.items()}, args.repeats, device)
        tokens = sum(len(x) for x in ours.tokenize(xs))
        rows.append({"input": name, "sentences": len(xs), "tokens": tokens, "times": times,
                     "diff": (outs["ours"] - outs["st"]).abs().max().item()})
    main = rows[-1]
    unique = list(dict.fromkeys(main_set))
    flops = forward_flops(ours.model.config, [len(x) for x in ours.tokenize(unique)])
    peak = matmul_peak(device, dtype_of(ours.precision))
    meters = {"ours": metered(lambda: run_ours(main_set), device), "st": metered(lambda: run_st(main_set), device)}
    scores = {"ours": stsb_spearman(run_ours, task), "st": stsb_spearman(run_st, task)}
    reference = parse_kwargs(args.reference_kwargs)
    if args.ours_kwargs or reference:  # ours with its options against ours without them (e.g. the padded path)
        scores["reference"] = stsb_spearman(encoders(load_ours(path, precision, args.device, {**batch, **reference}),
                                                     st, st_batch)[0], task)
    t = main["times"]
    record = {"bench": "encode", "model": label, "device": device_line(device), "precision": ours.precision,
              "peer_precision": peer_precision, "sentences": main["sentences"], "tokens": main["tokens"],
              "ours_sps": main["sentences"] / t["ours"], "st_sps": main["sentences"] / t["st"],
              "ours_tps": main["tokens"] / t["ours"], "st_tps": main["tokens"] / t["st"], "ratio": t["st"] / t["ours"],
              "st_batch": st_batch, "st_batch_search_s": search, "ours_kwargs": args.ours_kwargs or "",
              "ours_batch_size": ours.batch_size, "ours_max_tokens": ours.token_budget(), "mfu_ours": flops / t["ours"] / peak, "mfu_st": flops / t["st"] / peak,
              "peak_tflops": peak / 1e12, "peak": peak_label(device, dtype_of(ours.precision)),
              "idle_ours": meters["ours"].idle_fraction,
              "idle_st": meters["st"].idle_fraction, "mem_ours_mib": meters["ours"].peak_mib,
              "mem_st_mib": meters["st"].peak_mib, "memory": meters["ours"].memory_kind,
              "spearman_ours": scores["ours"], "spearman_st": scores["st"],
              "spearman_reference": scores.get("reference"), "repeats": args.repeats}
    if "st_fp32" in t:
        record["extra_ratio_vs_st_fp32"] = t["st_fp32"] / t["ours"]
    report(record, rows, search, args)
    return record


def report(r: dict, rows: list[dict], search: dict, args) -> None:
    ours_opts = f" {r['ours_kwargs']}" if r["ours_kwargs"] else ""
    print(f"\nmodel {r['model']}, {r['device']}, threads {args.threads}, ours {r['precision']} (batch "
          f"{r['ours_batch_size'] or 'by max_tokens ' + str(r.get('ours_max_tokens'))}{ours_opts}) vs sentence-transformers {r['peer_precision']} (batch {r['st_batch']}"
          + (f", best of {', '.join(f'{b}: {s:.2f} s' for b, s in search.items())} on "
             f"{min(r['sentences'], args.peer_search_sentences)} sentences" if search else "")
          + f"), median of {args.repeats} alternating runs")
    print("| input | sentences | tokens | ours sent/s | ours tokens/s | sentence-transformers sent/s | "
          "sentence-transformers tokens/s | ratio (ours/ST) | max abs diff |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        t, n, k = row["times"], row["sentences"], row["tokens"]
        print(f"| {row['input']} | {n} | {k} | {n / t['ours']:.1f} | {k / t['ours']:.0f} | {n / t['st']:.1f} | "
              f"{k / t['st']:.0f} | {t['st'] / t['ours']:.2f}x | {row['diff']:.2e} |")
    print(f"MFU (useful FLOPs over the real tokens / {r['peak']} peak {r['peak_tflops'] * 1e3:.1f} GFLOP/s, same "
          f"process): ours {r['mfu_ours']:.3f}, "
          f"sentence-transformers {r['mfu_st']:.3f}")
    print(f"device idle fraction (GPU waiting for the host): ours {pct(r['idle_ours'])}, sentence-transformers "
          f"{pct(r['idle_st'])}; peak memory ({r['memory']}): ours {r['mem_ours_mib']:.0f} MiB, "
          f"sentence-transformers {r['mem_st_mib']:.0f} MiB")
    if "extra_ratio_vs_st_fp32" in r:
        print(f"extra, not like for like: ours {r['precision']} vs sentence-transformers fp32: "
              f"{r['extra_ratio_vs_st_fp32']:.2f}x")
    line = (f"{args.task} Spearman x100: ours {r['precision']} {r['spearman_ours']:.3f}, sentence-transformers "
            f"{r['peer_precision']} {r['spearman_st']:.3f} (difference {r['spearman_ours'] - r['spearman_st']:+.3f})")
    if r["spearman_reference"] is not None:
        line += (f"; ours with --reference-kwargs '{args.reference_kwargs}' {r['spearman_reference']:.3f} "
                 f"(difference {r['spearman_ours'] - r['spearman_reference']:+.3f})")
    print(line)


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    add_model_args(parser)
    parser.add_argument("--data-dir", default=None, help="STS data dir (default: $STS_DATA_DIR)")
    parser.add_argument("--task", default="stsb-dev", help="the Spearman task (and the speed sentences without --wiki)")
    parser.add_argument("--wiki", type=int, default=0, help="time N distinct Wikipedia sentences instead of the task's")
    parser.add_argument("--batch-size", type=int, default=None, help="ours (default: none, the token budget evaluate.py uses: encoder.max_tokens)")
    parser.add_argument("--ours-kwargs", default="", help="options for our encoder, e.g. max_tokens=8192,packing=packed")
    parser.add_argument("--reference-kwargs", default="", help="ours for the Spearman reference, e.g. packing=padded")
    parser.add_argument("--peer-batch-sizes", default="32,128,512", help="sentence-transformers: its best of these")
    parser.add_argument("--peer-search-sentences", type=int, default=5000, help="time each batch size on this many")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--precision", default="fp32", help="ours: fp32 | bf16 | fp16, or a list (fp32,bf16,fp16)")
    parser.add_argument("--peer-precision", default="same", choices=["same", "fp32", "bf16", "fp16"])
    parser.add_argument("--extra-fp32-peer", action="store_true", help="also time sentence-transformers fp32 (extra line)")
    parser.add_argument("--device", default="cpu", help="cpu | cuda | auto: both encoders run there")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    path, label = model_from_args(args)
    task = load_task(args.task, args.data_dir)
    sentences = [s for p in task.subsets.values() for s in (*p.sentences1, *p.sentences2)]
    if args.wiki:
        speed_sets = [("distinct Wikipedia", list(dict.fromkeys(wiki_sentences(args.data_dir, args.wiki, required=True))))]
    else:
        speed_sets = [("raw list", sentences), ("de-duplicated", list(dict.fromkeys(sentences)))]
    print(cpu_line())  # figures move with the CPU kind (AVX2 / AVX-512), also where the GPU does the work
    records = []
    for precision in args.precision.split(","):
        records.append(compare(precision.strip(), path, label, task, speed_sets, args))
        append_record(args.json, records[-1])
    for r in records:
        print(f"ratio_vs_sentence_transformers_{r['peer_precision']} {r['ratio']:.2f}")


if __name__ == "__main__":
    main()
