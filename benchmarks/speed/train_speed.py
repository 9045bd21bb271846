"""Training speed: our steps vs sentence-transformers' losses, like for like, same batches, one process.

For each method (``--methods ct,nli,mnrl,cosent,simcse,mlm``) both sides run optimizer steps on the same batches
(``train_batches.py``; what each side's step is: ``train_sides.py``) in the same precision (``--peer-precision``
changes theirs), alternating in rounds so machine noise hits both. With a reduced precision our fp32 step runs as a
third side (``--fp32-reference``) and both of ours are scored on STS-B dev after the timed steps. Per method: steps/s,
real tokens/s, the ratio, MFU (``tools/mfu.py``), idle fraction and peak memory (``tools/device_meter.py``, over
``--meter-steps`` more steps) and the per-phase split (tokenize / forward+loss / backward / optimizer).

    python -m benchmarks.speed.train_speed --model paraphrase-MiniLM-L3-v2 --data-dir ../shared/data
    python -m benchmarks.speed.train_speed --precision bf16-mixed --peer-precision 32   # ours bf16 vs their fp32
    python -m benchmarks.speed.train_speed --device cuda --size bert-base --batch-size 64 --precision bf16-mixed \\
        --methods simcse,nli,mnrl,cosent,mlm,ct --simcse-max-length 32 --nli-max-length 128

The last lines are ``ratio_<ours>_vs_sentence_transformers_<theirs> <method> X.XX`` (bf16 / fp32).
"""

from __future__ import annotations

import argparse
import os
import statistics

os.environ.setdefault("WANDB_MODE", "disabled")

import torch  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from benchmarks.gpu.gpu_figures import append_record  # noqa: E402
from benchmarks.speed.train_batches import (  # noqa: E402
    KINDS,
    make_batches,
    predicted_positions,
    step_lengths,
    step_texts,
)
from benchmarks.speed.train_sides import PHASES, Ours, Theirs  # noqa: E402
from benchmarks.tools.bench_models import add_model_args, model_from_args  # noqa: E402
from benchmarks.tools.cpu_features import cpu_line  # noqa: E402
from benchmarks.tools.device_meter import metered  # noqa: E402
from benchmarks.tools.device_timing import device_line  # noqa: E402
from benchmarks.tools.mfu import dtype_of, matmul_peak, peak_label, training_flops  # noqa: E402
from sts_lightning.embeddings.errors import ConfigError  # noqa: E402
from sts_lightning.embeddings.methods.pooling import mean_pool  # noqa: E402
from sts_lightning.sts.tasks import load_task  # noqa: E402

NAMES = {"ct": "CT vs ContrastiveTensionLoss", "nli": "SBERT-NLI vs SoftmaxLoss",
         "mnrl": "SBERT-NLI MNRL vs MultipleNegativesRankingLoss", "cosent": "CoSENT vs CoSENTLoss",
         "simcse": "SimCSE vs MultipleNegativesRankingLoss (s, s)", "mlm": "MLM (packed) vs BertForMaskedLM (padded)"}


def max_length_of(kind: str, args) -> int:
    return {"ct": args.ct_max_length, "simcse": args.simcse_max_length, "mlm": args.mlm_max_length}.get(
        kind, args.nli_max_length)


def bench(kind: str, path: str, args) -> dict:
    max_length = max_length_of(kind, args)
    reduced, peer = args.precision != "32", peer_precision(args)
    device = torch.device(args.device)
    sides: dict = {}
    torch.manual_seed(0)
    dense = args.dense_embedding_grads
    sides["ours"] = Ours(kind, path, max_length, args.batch_size, autocast=reduced, dense_embedding_grads=dense,
                         device=device)
    if reduced and (args.fp32_reference == "all" or kind in args.fp32_reference.split(",")):
        torch.manual_seed(0)  # the same initial weights and batches, in fp32: the accuracy reference
        sides["ours_fp32"] = Ours(kind, path, max_length, args.batch_size, dense_embedding_grads=dense, device=device)
    sides["theirs"] = Theirs(kind, path, max_length, args.batch_size, autocast=peer != "32", device=device)
    batches = make_batches(kind, args.data_dir, args.nli_source, args.warmup + args.steps + args.meter_steps,
                           args.batch_size, wiki=args.simcse_data == "wiki")
    for i in range(args.warmup):  # untimed: allocator, thread pools, optimizer state
        for side in sides.values():
            side.step(batches[i], i)
    times: dict[str, list[dict]] = {name: [] for name in sides}
    rounds = [list(range(s, min(s + args.round, args.steps))) for s in range(0, args.steps, args.round)]
    names = list(sides)
    for r, idx in enumerate(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:  # rotate who goes first
            for i in idx:
                times[name].append(sides[name].step(batches[args.warmup + i], args.warmup + i))
    extra = batches[args.warmup + args.steps:]
    meters = {name: metered(lambda s=sides[name]: [s.step(b, i) for i, b in enumerate(extra)], device)
              for name in ("ours", "theirs")} if extra else {}
    scores = {name: stsb_dev(sides[name].module, args.data_dir) for name in sides if name.startswith("ours")}
    tokenizer = AutoTokenizer.from_pretrained(path)
    timed = batches[args.warmup: args.warmup + args.steps]
    lengths = [step_lengths(tokenizer, step_texts(kind, b, args.batch_size), max_length) for b in timed]
    config = sides["ours"].module.encoder.model.config
    flops = statistics.fmean(training_flops(config, n, predicted_positions(kind, n)) for n in lengths)
    tokens = statistics.fmean(sum(n) for n in lengths)
    peak = matmul_peak(device, dtype_of(args.precision))
    return {"kind": kind, "max_length": max_length, "times": times, "stsb": scores, "meters": meters,
            "flops": flops, "tokens": tokens, "peak": peak, "peak_label": peak_label(device, dtype_of(args.precision))}


def stsb_dev(module, data_dir) -> float:
    """STS-B dev Spearman x100 of a trained module's encoder (mean pooling, fp32, eval mode)."""
    from scipy.stats import spearmanr

    pairs = list(load_task("stsb-dev", data_dir).subsets.values())
    s1, s2 = [s for p in pairs for s in p.sentences1], [s for p in pairs for s in p.sentences2]
    gold = [g for p in pairs for g in p.scores]
    module.eval()
    with torch.inference_mode():
        a = torch.nn.functional.normalize(module.encoder.encode(s1, mean_pool, show_progress=False), dim=-1)
        b = torch.nn.functional.normalize(module.encoder.encode(s2, mean_pool, show_progress=False), dim=-1)
    module.train()
    return 100 * float(spearmanr((a * b).sum(-1).float().cpu().numpy(), gold).correlation)


def median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def peer_precision(args) -> str:
    return args.precision if args.peer_precision == "same" else args.peer_precision


def tag(precision: str) -> str:
    return "fp32" if precision == "32" else "bf16"


def record_of(res: dict, label: str, args) -> dict:
    """The JSON figures of one method (``benchmarks/gpu/gpu_figures.py`` makes the table of them)."""
    o, t = median(res["times"]["ours"], "total"), median(res["times"]["theirs"], "total")
    meter = {name: m.as_dict() for name, m in res["meters"].items()}
    return {"bench": "train", "method": res["kind"], "model": label, "device": device_line(args.device),
            "batch_size": args.batch_size, "max_length": res["max_length"], "precision": args.precision,
            "peer_precision": peer_precision(args), "ours_ms": 1000 * o, "st_ms": 1000 * t, "ratio": t / o,
            "tokens_per_step": res["tokens"], "ours_tps": res["tokens"] / o, "st_tps": res["tokens"] / t,
            "mfu_ours": res["flops"] / o / res["peak"], "mfu_st": res["flops"] / t / res["peak"],
            "peak_tflops": res["peak"] / 1e12, "peak": res["peak_label"],
            "idle_ours": meter.get("ours", {}).get("idle_fraction"), "idle_st": meter.get("theirs", {}).get("idle_fraction"),
            "mem_ours_mib": meter.get("ours", {}).get("peak_mib"), "mem_st_mib": meter.get("theirs", {}).get("peak_mib"),
            "phases_ms": {side: {p: 1000 * median(rows, p) for p in (*PHASES, "total")}
                          for side, rows in res["times"].items()}, "stsb": res["stsb"], "steps": args.steps}


def report(results: list[dict], records: list[dict], label: str, args) -> None:
    print(f"\n{cpu_line()}")
    print(f"\nmodel {label}, batch {args.batch_size}, threads {args.threads}, {args.steps} timed steps per side after "
          f"{args.warmup} warm-up, rounds of {args.round}, {device_line(args.device)}; steps/s = 1 / median step time; "
          f"ours in precision {args.precision}, theirs {peer_precision(args)}")
    print("| method | max length | ours steps/s | theirs steps/s | ratio (ours/theirs) | ratio of means | "
          "tokens/step | ours tokens/s | MFU ours / theirs | idle ours / theirs | peak MiB ours / theirs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for res, r in zip(results, records, strict=True):
        o, t = res["times"]["ours"], res["times"]["theirs"]
        mean_ratio = statistics.fmean(x["total"] for x in t) / statistics.fmean(x["total"] for x in o)
        idle = " / ".join(m.idle_text() for m in res["meters"].values()) or "-"
        mem = " / ".join(f"{m.peak_mib:.0f}" for m in res["meters"].values()) or "-"
        print(f"| {NAMES[res['kind']]} | {res['max_length']} | {1000 / r['ours_ms']:.2f} | {1000 / r['st_ms']:.2f} | "
              f"{r['ratio']:.2f}x | {mean_ratio:.2f}x | {r['tokens_per_step']:.0f} | {r['ours_tps']:.0f} | "
              f"{r['mfu_ours']:.3f} / {r['mfu_st']:.3f} | {idle} | {mem} |")
    meters = next((m for res in results for m in res["meters"].values()), None)
    print(f"MFU: useful training FLOPs (3 x forward over the real tokens) / {records[0]['peak']} peak "
          f"{records[0]['peak_tflops'] * 1e3:.1f} GFLOP/s, same process; idle and memory from {args.meter_steps} more "
          f"steps per side ({meters.memory_kind if meters else 'not metered'})")
    print("\nmedian ms per phase. ours: tokenize = encoder.tokenize (ids only; MLM: its rows), padding and CT pair "
          "sampling are in forward+loss. theirs: tokenize = CT pair sampling + st.tokenize (padded tensors) + "
          "batch_to_device")
    print("| method | side | " + " | ".join(PHASES) + " | total |")
    print("|---|---|" + "---|" * (len(PHASES) + 1))
    for r in records:
        for side, cells in r["phases_ms"].items():
            print(f"| {r['method']} | {side} | " + " | ".join(f"{cells[p]:.1f}" for p in (*PHASES, "total")) + " |")
    print()
    for res in results:
        stsb = res["stsb"]
        line = f"{res['kind']}: STS-B dev after {args.warmup + args.steps} steps: ours {args.precision} {stsb['ours']:.2f}"
        if "ours_fp32" in stsb:
            o, f = median(res["times"]["ours"], "total"), median(res["times"]["ours_fp32"], "total")
            line += (f", ours fp32 {stsb['ours_fp32']:.2f} (difference {stsb['ours'] - stsb['ours_fp32']:+.2f}); "
                     f"ours {args.precision} / ours fp32 speed {f / o:.2f}x")
        print(line)
    for r in records:
        print(f"ratio_{tag(args.precision)}_vs_sentence_transformers_{tag(r['peer_precision'])} {r['method']} "
              f"{r['ratio']:.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="paraphrase-MiniLM-L3-v2")
    add_model_args(parser)
    parser.add_argument("--data-dir", default=None, help="data dir with nli/snli, stsb, wiki (default: $STS_DATA_DIR)")
    parser.add_argument("--nli-source", default="snli:dev")
    parser.add_argument("--methods", default="ct,nli", help=f"any of {','.join(KINDS)}")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per side and method")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per side first")
    parser.add_argument("--meter-steps", type=int, default=2, help="steps per side for idle fraction and memory (0: off)")
    parser.add_argument("--round", type=int, default=1, help="steps per side before switching sides")
    parser.add_argument("--batch-size", type=int, default=16, help="rows per step (CT: pairs and pool size)")
    parser.add_argument("--ct-max-length", type=int, default=75)
    parser.add_argument("--nli-max-length", type=int, default=128, help="nli, mnrl and cosent")
    parser.add_argument("--simcse-max-length", type=int, default=32)
    parser.add_argument("--mlm-max-length", type=int, default=128)
    parser.add_argument("--simcse-data", default="wiki", choices=["wiki", "nli"],
                        help="SimCSE / MLM batches: Wikipedia sentences (the recipe's data) or the --nli-source pool")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--precision", default="32", choices=["32", "bf16-mixed"], help="our training precision")
    parser.add_argument("--peer-precision", default="same", choices=["same", "32", "bf16-mixed"],
                        help="sentence-transformers' precision (same: like for like)")
    parser.add_argument("--fp32-reference", default="all", help="methods with our fp32 third side (all | none | a,b)")
    parser.add_argument("--dense-embedding-grads", action="store_true",
                        help="CT: ours with dense word-embedding gradients and torch's RMSprop (before row-sparse updates)")
    parser.add_argument("--device", default="cpu", help="cpu | cuda: both sides train there")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    kinds = args.methods.split(",")
    if unknown := [k for k in kinds if k not in KINDS]:
        raise ConfigError(f"--methods: {', '.join(unknown)} not among {', '.join(KINDS)}")
    path, label = model_from_args(args)
    results, records = [], []
    for kind in kinds:
        results.append(bench(kind, path, args))
        records.append(record_of(results[-1], label, args))
        append_record(args.json, records[-1])
    report(results, records, label, args)


if __name__ == "__main__":
    main()
