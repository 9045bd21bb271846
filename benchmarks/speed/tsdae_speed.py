"""Training speed: our TSDAE step vs sentence-transformers' ``DenoisingAutoEncoderLoss``, same model and batches.

Both sides train the same encoder ([CLS] pooling) with a tied decoder on the same (noisy, original) batches of
local Wikipedia sentences (noise drawn once by our ``add_noise``, off both clocks), dropout on, fused AdamW lr 3e-5
(the paper's recipe), alternating in rounds. A step is timed end to end: tokenization, encoder, decoder, loss,
backward, optimizer. Steps/s = 1 / median step time, per ``--batch-sizes``; ``--whole-head`` adds our step with the
LM head over every position, as sentence-transformers computes it.

    nice -n 15 python -m benchmarks.speed.tsdae_speed --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("WANDB_MODE", "disabled")

import torch  # noqa: E402

from benchmarks.speed.train_batches import wiki_sentences  # noqa: E402
from benchmarks.speed.train_sides import param_groups  # noqa: E402
from benchmarks.tools.cpu_features import cpu_line  # noqa: E402
from sts_lightning.embeddings.encoders.packaged import resolve_model_path  # noqa: E402
from sts_lightning.embeddings.methods.tsdae import objective  # noqa: E402
from sts_lightning.embeddings.methods.tsdae.objective import add_noise, noise_rng  # noqa: E402
from sts_lightning.lightning_modules.optimizers import adam  # noqa: E402
from sts_lightning.lightning_modules.tsdae import TSDAEModule  # noqa: E402

LR = 3e-5


class Ours:
    """``whole_head``: the LM head over every decoder position, padding included (as sentence-transformers)."""

    def __init__(self, path: str, whole_head: bool = False):
        self.whole_head = whole_head
        self.module = TSDAEModule(path, pooling="cls")
        self.module.log = lambda *args, **kwargs: None
        self.opt = adam(param_groups(self.module, 0.0), lr=LR, decoupled=True)
        self.module.train()

    def step(self, noisy: list[str], originals: list[str]) -> float:
        find_head = objective._lm_head
        if self.whole_head:
            objective._lm_head = lambda decoder: None
        try:
            t0 = time.perf_counter()
            loss = self.module.loss(noisy, originals)
        finally:
            objective._lm_head = find_head
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()
        return time.perf_counter() - t0


class Theirs:
    def __init__(self, path: str, max_length: int):
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.losses import DenoisingAutoEncoderLoss
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

        transformer = Transformer(path, max_seq_length=max_length)
        dim = transformer.get_word_embedding_dimension()
        self.st = SentenceTransformer(modules=[transformer, Pooling(dim, pooling_mode="cls")], device="cpu")
        self.loss = DenoisingAutoEncoderLoss(self.st, tie_encoder_decoder=True)
        self.loss.train()
        self.opt = adam(param_groups(self.loss, 0.0), lr=LR, decoupled=True)

    def step(self, noisy: list[str], originals: list[str]) -> float:
        t0 = time.perf_counter()
        features = [self.st.preprocess(noisy), self.st.preprocess(originals)]
        loss = self.loss(features, None)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()
        return time.perf_counter() - t0


def bench(path: str, batch_size: int, wiki: list[str], args) -> dict[str, list[float]]:
    torch.manual_seed(0)
    ours = Ours(path)
    torch.manual_seed(0)
    theirs = Theirs(path, ours.module.encoder.max_length)
    sides = {"ours": ours, "theirs": theirs}
    if args.whole_head:
        torch.manual_seed(0)
        sides["ours_whole_head"] = Ours(path, whole_head=True)
    n = args.warmup + args.steps
    originals = [[wiki[(b * batch_size + j) % len(wiki)] for j in range(batch_size)] for b in range(n)]
    batches = [(add_noise(o, noise_rng(0, 0, b)), o) for b, o in enumerate(originals)]
    for b in range(args.warmup):  # untimed: allocator, thread pools, optimizer state
        for side in sides.values():
            side.step(*batches[b])
    times: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for i in range(args.steps):
        for name in names[i % len(names):] + names[: i % len(names)]:  # rotate who goes first
            times[name].append(sides[name].step(*batches[args.warmup + i]))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="paraphrase-MiniLM-L3-v2")
    parser.add_argument("--data-dir", default=None, help="data dir with wiki/wiki_sentences_100k.txt ($STS_DATA_DIR)")
    parser.add_argument("--batch-sizes", default="8,16,32,64")
    parser.add_argument("--steps", type=int, default=6, help="timed steps per side and batch size")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per side first")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--whole-head", action="store_true",
                        help="a third side: ours with the LM head over padding too (what the labelled-only head saves)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    wiki = wiki_sentences(args.data_dir)
    if not wiki:
        raise SystemExit("no wiki/wiki_sentences_100k.txt under --data-dir / $STS_DATA_DIR")
    path = resolve_model_path(args.model)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    results = {b: bench(path, b, wiki, args) for b in sizes}
    print(f"\n{cpu_line()}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (1 min)")
    print(f"\nmodel {args.model}, [CLS], tied decoder, threads {args.threads}, {args.steps} timed steps per side after "
          f"{args.warmup} warm-up, alternating; steps/s = 1 / median step time; fp32, CPU")
    whole = "| ours, whole LM head steps/s " if args.whole_head else ""
    print(f"| batch | ours steps/s | theirs steps/s {whole}| ratio (ours/theirs) | ratio of means |")
    print("|---|---|---|---|---|" + ("---|" if whole else ""))
    for b, times in results.items():
        mo, mt = statistics.median(times["ours"]), statistics.median(times["theirs"])
        means = statistics.fmean(times["theirs"]) / statistics.fmean(times["ours"])
        extra = f"| {1 / statistics.median(times['ours_whole_head']):.2f} " if whole else ""
        print(f"| {b} | {1 / mo:.2f} | {1 / mt:.2f} {extra}| {mt / mo:.2f}x | {means:.2f}x |")
    print()
    for b, times in results.items():
        print(f"ratio_fp32_vs_sentence_transformers_fp32 tsdae_batch{b} "
              f"{statistics.median(times['theirs']) / statistics.median(times['ours']):.2f}")


if __name__ == "__main__":
    main()
