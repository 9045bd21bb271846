"""Training speed: our CT, SBERT-NLI and SimCSE steps vs sentence-transformers' losses, same model/batch/length, one run.

For each method both sides run optimizer steps on the SAME batches (same sentences, batch size, max
length, threads, optimizer type and learning rate) in the same process, alternating in rounds (ours
then theirs, then theirs then ours, ...) so machine noise hits both. A step is timed end to end:

* ours:   ``module.training_step(batch, i)`` (tokenization, padding, forward, loss; for CT also the pair
          sampling and the no-grad per-label losses it logs) + ``loss.backward()`` + ``opt.step()`` +
          ``opt.zero_grad()``; ``module.log`` is a no-op (no trainer attached).
* theirs: (CT: ``make_ct_pairs`` on the same pool) + ``st.tokenize`` of each column + ``batch_to_device``
          + ``loss(features, labels)`` + ``backward`` + ``opt.step()`` + ``opt.zero_grad()``, with
          sentence-transformers' ``ContrastiveTensionLoss`` / ``SoftmaxLoss``; SimCSE: its own unsupervised
          SimCSE recipe, ``MultipleNegativesRankingLoss`` (scale 20 = temperature 0.05) on ``(s, s)`` columns
          (ours: ``SimCSEModule`` with mean pooling and no MLP, both views in one padded pass).

SimCSE batches are ``--batch-size`` Wikipedia sentences (``wiki/wiki_sentences_100k.txt`` under the data dir; the
SNLI pool where it is missing, or with ``--simcse-data nli``), max length ``--simcse-max-length`` (the paper's 32).
At 32 tokens many Wikipedia sentences are truncated, so little padding is left to save (theirs pads ~23% over
the real tokens); ours runs both views in one padded pass (``SimCSEModule.length_buckets``: length groups were slower).

Dropout as each recipe trains: on for NLI and SimCSE (both sides ``train()``, p 0.1), off for CT (the paper; our module
enforces it, the ST models are put in ``eval()`` so both sides do the same arithmetic). Optimizers: AdamW
(fused, as our modules and sentence-transformers' trainer) lr 2e-5 / weight decay 0.01 (no decay on 1-D params) for NLI, RMSprop lr 1e-5 (alpha 0.9, eps 1e-7) for
CT, on both sides (ours: the module's own ``configure_optimizers``, i.e. row-sparse word-embedding updates,
``lightning_modules/row_sparse_rmsprop.py``; ``--dense-embedding-grads``: torch's RMSprop as theirs). Steps/s = 1 / median step time over the timed steps; the per-phase split
(tokenize / forward+loss / backward / optimizer) is printed for both sides.

    python -m benchmarks.train_speed --model paraphrase-MiniLM-L3-v2 --data-dir ../shared/data
    python -m benchmarks.train_speed --precision bf16-mixed   # ours in bf16 autocast; ours fp32 alongside
    python -m benchmarks.train_speed --device cuda --model <dir>   # both sides on the GPU, each phase timed to its last kernel

``--precision bf16-mixed`` runs our step under ``torch.autocast("cpu", torch.bfloat16)`` (what Lightning's
``trainer.precision=bf16-mixed`` does: fp32 master weights, bf16 matmuls, the backward outside autocast) and
adds a third side, our fp32 step from the same initial weights on the same batches; after the timed steps
both of our models are scored on STS-B dev (mean pooling, fp32), and the last lines print
``ratio_bf16_vs_sentence_transformers_fp32 <method> X.XX`` and the Spearman difference to our fp32 run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import defaultdict

os.environ.setdefault("WANDB_MODE", "disabled")

import torch  # noqa: E402

from benchmarks.cpu_features import cpu_line  # noqa: E402
from benchmarks.device_timing import CPU, device_line, synchronize  # noqa: E402
from sts_lightning.datamodules.nli_readers import load_source  # noqa: E402
from sts_lightning.embeddings.encoders.packaged import resolve_model_path  # noqa: E402
from sts_lightning.embeddings.methods.ct.objective import make_ct_pairs, pair_rng  # noqa: E402
from sts_lightning.embeddings.methods.pooling import mean_pool  # noqa: E402
from sts_lightning.lightning_modules.ct import ContrastiveTensionModule  # noqa: E402
from sts_lightning.lightning_modules.optimizers import adam  # noqa: E402
from sts_lightning.lightning_modules.sbert_nli import SBERTNLIModule  # noqa: E402
from sts_lightning.lightning_modules.simcse import SimCSEModule, set_dropout  # noqa: E402
from sts_lightning.sts.tasks import load_task  # noqa: E402

PHASES = ("tokenize", "forward+loss", "backward", "optimizer")


def param_groups(module: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Decay on matrices only (biases and LayerNorm weights are 1-D), as ``EncoderModule._param_groups``."""
    params = [p for p in module.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]


def make_optimizer(kind: str, module: torch.nn.Module) -> torch.optim.Optimizer:
    if kind in ("nli", "simcse"):  # fused: our modules' AdamW and sentence-transformers' trainer default (adamw_torch_fused)
        return adam(param_groups(module, 0.01), lr=2e-5, decoupled=True)
    return torch.optim.RMSprop(param_groups(module, 0.0), lr=1e-5, alpha=0.9, eps=1e-7)


class Clock:
    """Per-phase seconds of the current step; ``wrap`` times a callable into the ``tokenize`` phase."""

    def __init__(self) -> None:
        self.split: dict[str, float] = defaultdict(float)

    def wrap(self, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            self.split["tokenize"] += time.perf_counter() - t0
            return out
        return timed


class Ours:
    def __init__(self, kind: str, path: str, max_length: int, batch_size: int, autocast: bool = False,
                 dense_embedding_grads: bool = False, device: torch.device = CPU):
        self.clock = Clock()
        self.autocast, self.device = autocast, device
        if kind == "nli":
            self.module = SBERTNLIModule(path, pooling="mean", max_length=max_length)
        elif kind == "simcse":
            self.module = SimCSEModule(path, pooling="mean", mlp="none", max_length=max_length, dropout=0.1)
        else:
            self.module = ContrastiveTensionModule(path, pooling="mean", max_length=max_length,
                                                   pairs=batch_size, positives=2)
        self.module.log = lambda *args, **kwargs: None  # no trainer: logging is a no-op
        self.module.to(device)  # before the optimizer takes the parameters, as Lightning does
        for encoder in (self.module.encoder, getattr(self.module, "encoder2", None)):
            if encoder is not None:  # instance attribute: times tokenization, code unchanged
                encoder.tokenize = self.clock.wrap(encoder.tokenize)
        if kind == "ct" and not dense_embedding_grads:  # what train.py model=ct runs on one process
            self.opt = self.module.configure_optimizers()["optimizer"]
        else:
            self.opt = make_optimizer(kind, self.module)
        self.module.train()

    def step(self, batch: dict, i: int) -> dict[str, float]:
        self.clock.split.clear()
        synchronize(self.device)
        t0 = time.perf_counter()
        batch = {k: v.to(self.device) if torch.is_tensor(v) else v for k, v in batch.items()}  # as Lightning does
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            loss = self.module.training_step(batch, i)
        synchronize(self.device)
        t1 = time.perf_counter()
        loss.backward()
        synchronize(self.device)
        t2 = time.perf_counter()
        self.opt.step()
        self.opt.zero_grad()
        synchronize(self.device)
        t3 = time.perf_counter()
        tok = self.clock.split["tokenize"]
        return {"tokenize": tok, "forward+loss": t1 - t0 - tok, "backward": t2 - t1, "optimizer": t3 - t2,
                "total": t3 - t0}


class Theirs:
    def __init__(self, kind: str, path: str, max_length: int, batch_size: int, seed: int = 0,
                 device: torch.device = CPU):
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.losses import (
            ContrastiveTensionLoss,
            MultipleNegativesRankingLoss,
            SoftmaxLoss,
        )
        from sentence_transformers.util import batch_to_device

        self.kind, self.batch_size, self.seed = kind, batch_size, seed
        self.to_device = batch_to_device
        self.st = SentenceTransformer(path, device=str(device))
        self.st.max_seq_length = max_length
        if kind == "nli":
            dim = getattr(self.st, "get_embedding_dimension", self.st.get_sentence_embedding_dimension)()
            self.loss = SoftmaxLoss(self.st, dim, num_labels=3)
            self.loss.train()
        elif kind == "simcse":
            set_dropout(self.st[0].auto_model, 0.1)  # the same p as ours, whatever the checkpoint's config says
            self.loss = MultipleNegativesRankingLoss(self.st, scale=20.0)
            self.loss.train()
        else:
            self.loss = ContrastiveTensionLoss(self.st)  # deep-copies the model: model1 and model2
            self.loss.eval()  # dropout off, as the CT paper and our module
        self.opt = make_optimizer(kind, self.loss)

    def step(self, batch: dict, i: int) -> dict[str, float]:
        synchronize(self.st.device)
        t0 = time.perf_counter()
        if self.kind == "nli":
            columns, labels = (batch["sentences1"], batch["sentences2"]), batch["labels"]
        elif self.kind == "simcse":  # sentence-transformers' unsupervised SimCSE: the same column twice
            columns, labels = (batch["sentences"], batch["sentences"]), torch.zeros(0)
        else:  # the pairs our module draws at global_step 0 (no trainer) from the same pool
            texts1, texts2, labels = make_ct_pairs(batch["sentences"], pair_rng(self.seed, 0, 0),
                                                   batch_size=self.batch_size, positives=2)
            columns, labels = (texts1, texts2), labels.float()
        features = [self.to_device(self.st.tokenize(list(c)), self.st.device) for c in columns]
        synchronize(self.st.device)
        t1 = time.perf_counter()
        loss = self.loss(features, labels.to(self.st.device))
        synchronize(self.st.device)
        t2 = time.perf_counter()
        loss.backward()
        synchronize(self.st.device)
        t3 = time.perf_counter()
        self.opt.step()
        self.opt.zero_grad()
        synchronize(self.st.device)
        t4 = time.perf_counter()
        return {"tokenize": t1 - t0, "forward+loss": t2 - t1, "backward": t3 - t2, "optimizer": t4 - t3,
                "total": t4 - t0}


def make_batches(kind: str, data, n: int, batch_size: int, wiki: list[str] | None = None) -> list[dict]:
    """``n`` batches of ``batch_size``; SimCSE from ``wiki`` when given, else (and CT) from the NLI sentence pool."""
    if kind == "simcse" and wiki:
        return [{"sentences": [wiki[(b * batch_size + j) % len(wiki)] for j in range(batch_size)]} for b in range(n)]
    if kind == "nli":
        rows = list(zip(data.premises, data.hypotheses, data.labels, strict=True))
        out = []
        for b in range(n):
            chunk = [rows[(b * batch_size + j) % len(rows)] for j in range(batch_size)]
            out.append({"sentences1": [r[0] for r in chunk], "sentences2": [r[1] for r in chunk],
                        "labels": torch.tensor([r[2] for r in chunk], dtype=torch.long)})
        return out
    pool = list(dict.fromkeys([*data.premises, *data.hypotheses]))
    return [{"sentences": [pool[(b * batch_size + j) % len(pool)] for j in range(batch_size)]} for b in range(n)]


def bench(kind: str, path: str, data, args) -> dict:
    max_length = {"ct": args.ct_max_length, "simcse": args.simcse_max_length}.get(kind, args.nli_max_length)
    reduced = args.precision != "32"
    sides: dict = {}
    torch.manual_seed(0)
    dense = args.dense_embedding_grads
    device = torch.device(args.device)
    sides["ours"] = Ours(kind, path, max_length, args.batch_size, autocast=reduced, dense_embedding_grads=dense,
                         device=device)
    if reduced:  # the same initial weights (same seed) and batches, in fp32: the accuracy reference
        torch.manual_seed(0)
        sides["ours_fp32"] = Ours(kind, path, max_length, args.batch_size, dense_embedding_grads=dense, device=device)
    sides["theirs"] = Theirs(kind, path, max_length, args.batch_size, device=device)
    wiki = wiki_sentences(args.data_dir) if args.simcse_data == "wiki" else None
    batches = make_batches(kind, data, args.warmup + args.steps, args.batch_size, wiki)
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
    scores = {name: stsb_dev(sides[name].module, args.data_dir) for name in sides if name.startswith("ours")}
    return {"kind": kind, "max_length": max_length, "times": times, "stsb": scores}


def wiki_sentences(data_dir, limit: int = 20000) -> list[str] | None:
    """The first ``limit`` local Wikipedia sentences (SimCSE's kind of data), or ``None`` where the file is missing."""
    from pathlib import Path

    path = Path(data_dir or os.environ.get("STS_DATA_DIR", ".")) / "wiki" / "wiki_sentences_100k.txt"
    if not path.is_file():
        return None
    with path.open(encoding="utf-8") as f:
        return [line.strip() for _, line in zip(range(limit), f, strict=False) if line.strip()]


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="paraphrase-MiniLM-L3-v2")
    parser.add_argument("--data-dir", default=None, help="data dir with nli/snli (default: $STS_DATA_DIR)")
    parser.add_argument("--nli-source", default="snli:dev")
    parser.add_argument("--methods", default="ct,nli")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per side and method")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per side first")
    parser.add_argument("--round", type=int, default=1, help="steps per side before switching sides")
    parser.add_argument("--batch-size", type=int, default=16, help="NLI pairs / CT pairs (and CT pool size)")
    parser.add_argument("--ct-max-length", type=int, default=75)
    parser.add_argument("--nli-max-length", type=int, default=128)
    parser.add_argument("--simcse-max-length", type=int, default=32)
    parser.add_argument("--simcse-data", default="wiki", choices=["wiki", "nli"],
                        help="SimCSE batches: Wikipedia sentences (the recipe's data) or the --nli-source sentence pool")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--precision", default="32", choices=["32", "bf16-mixed"],
                        help="our training precision (sentence-transformers' trainer runs fp32)")
    parser.add_argument("--dense-embedding-grads", action="store_true",
                        help="CT: ours with dense word-embedding gradients and torch's RMSprop (before row-sparse updates)")
    parser.add_argument("--device", default="cpu", help="cpu | cuda: both sides train there")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    path = resolve_model_path(args.model)
    data = load_source(args.nli_source, args.data_dir)
    results = [bench(kind, path, data, args) for kind in args.methods.split(",")]

    names = {"ct": "CT vs ContrastiveTensionLoss", "nli": "SBERT-NLI vs SoftmaxLoss",
             "simcse": "SimCSE vs MultipleNegativesRankingLoss (s, s)"}
    print(f"\n{cpu_line()}")
    print(f"\nmodel {args.model}, batch {args.batch_size}, threads {args.threads}, {args.steps} timed steps "
          f"per side after {args.warmup} warm-up, rounds of {args.round}, {device_line(args.device)}; "
          "steps/s = 1 / median step time; "
          f"ours in precision {args.precision}, theirs fp32")
    print("| method | max length | ours steps/s | theirs steps/s | ratio (ours/theirs) | ratio of means |")
    print("|---|---|---|---|---|---|")
    for res in results:
        o, t = res["times"]["ours"], res["times"]["theirs"]
        mo, mt = median(o, "total"), median(t, "total")
        mean_ratio = statistics.fmean(r["total"] for r in t) / statistics.fmean(r["total"] for r in o)
        print(f"| {names[res['kind']]} | {res['max_length']} | {1 / mo:.2f} | {1 / mt:.2f} | {mt / mo:.2f}x | "
              f"{mean_ratio:.2f}x |")
    print("\nmedian ms per phase. ours: tokenize = encoder.tokenize (ids only), padding and CT pair sampling are in "
          "forward+loss. theirs: tokenize = CT pair sampling + st.tokenize (padded tensors) + batch_to_device")
    print("| method | side | " + " | ".join(PHASES) + " | total |")
    print("|---|---|" + "---|" * (len(PHASES) + 1))
    for res in results:
        for side, rows in res["times"].items():
            cells = [f"{1000 * median(rows, p):.1f}" for p in (*PHASES, "total")]
            print(f"| {res['kind']} | {side} | " + " | ".join(cells) + " |")
    print()
    for res in results:
        stsb = res["stsb"]
        line = f"{res['kind']}: STS-B dev after {args.warmup + args.steps} steps: ours {args.precision} {stsb['ours']:.2f}"
        if "ours_fp32" in stsb:
            o, f = median(res["times"]["ours"], "total"), median(res["times"]["ours_fp32"], "total")
            line += (f", ours fp32 {stsb['ours_fp32']:.2f} (difference {stsb['ours'] - stsb['ours_fp32']:+.2f}); "
                     f"ours {args.precision} / ours fp32 speed {f / o:.2f}x")
        print(line)
    tag = "bf16" if args.precision != "32" else "fp32"
    for res in results:
        o, t = median(res["times"]["ours"], "total"), median(res["times"]["theirs"], "total")
        print(f"ratio_{tag}_vs_sentence_transformers_fp32 {res['kind']} {t / o:.2f}")


if __name__ == "__main__":
    main()
