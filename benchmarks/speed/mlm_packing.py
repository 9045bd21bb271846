"""MLM packing: the padding share of a sentence file's batches and the training steps/s, packed and not.

Padding share: every batch of ``--batch-size`` sentences of a seeded shuffle of the file, tokenised with the
model's tokenizer at ``--max-length``, laid out as ``MLMModule`` lays them out (``embeddings.methods.mlm.objective``:
one sentence a row padded to the batch's longest, or packed rows). Steps/s: ``MLMModule.training_step`` (tokenise,
pack, mask, forward, loss) + backward + AdamW step on the first batches, packed and unpacked modules alternating
step by step so machine noise hits both; the first ``--warmup`` steps of each are not timed; the median step counts.

    python -m benchmarks.speed.mlm_packing --data-dir ../shared/data            # from scratch 4x256, batch 64, length 128
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import torch

from sts_lightning.lightning_modules.mlm import MLMModule


def sentences(path: Path, seed: int) -> list[str]:
    lines = [s for s in (raw.strip() for raw in path.open(encoding="utf-8")) if s]
    random.Random(seed).shuffle(lines)
    return lines


def padding_share(module, lines: list[str], batch_size: int) -> float:
    """Padding positions / all positions the encoder computes, over every full batch of ``lines``."""
    pad = total = 0
    for start in range(0, len(lines) - batch_size + 1, batch_size):
        mask = module.rows(lines[start:start + batch_size]).attention_mask
        pad, total = pad + int((mask == 0).sum()), total + mask.numel()
    return pad / total if total else 0.0


def steps_per_s(modules: dict, lines: list[str], batch_size: int, steps: int, warmup: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in modules}
    optimizers = {name: torch.optim.AdamW(m.parameters(), lr=m.hparams.lr) for name, m in modules.items()}
    for step in range(warmup + steps):
        batch = {"sentences": lines[step * batch_size:(step + 1) * batch_size]}
        for name, module in modules.items():
            started = time.perf_counter()
            module.training_step(batch, step).backward()
            optimizers[name].step()
            optimizers[name].zero_grad()
            if step >= warmup:
                times[name].append(time.perf_counter() - started)
    return {name: 1.0 / statistics.median(t) for name, t in times.items()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--file", default="wiki/wiki_sentences_100k.txt")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    lines = sentences(Path(args.data_dir) / args.file, args.seed)
    scratch = {"layers": args.layers, "hidden": args.hidden, "heads": args.heads, "intermediate": 4 * args.hidden}
    modules = {f"pack={pack}": MLMModule(from_scratch=scratch, pack=pack, max_length=args.max_length).train()
               for pack in (True, False)}
    result = {name: {"padding_share": padding_share(m, lines, args.batch_size)} for name, m in modules.items()}
    for name, rate in steps_per_s(modules, lines, args.batch_size, args.steps, args.warmup).items():
        result[name]["steps_per_s"] = rate
    for name, row in result.items():
        print(f"{name}: padding share {row['padding_share']:.1%}, {row['steps_per_s']:.3f} steps/s "
              f"({args.layers}x{args.hidden} from scratch, batch {args.batch_size}, max_length {args.max_length})")
    return result


if __name__ == "__main__":
    main()
