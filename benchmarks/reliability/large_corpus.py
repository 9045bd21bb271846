"""A 100M-line sentence corpus: peak RSS per rank, scan lines/s, steps/s, and whether a resumed epoch continues the
uninterrupted order; optionally against an older revision.

    python -m benchmarks.reliability.large_corpus --lines 100000000 --dir /work/tmp/large_corpus [--old-rev <rev>]

Why: a corpus of that size must index in seconds and cost a rank little memory. Each phase runs in a fresh
subprocess importing ``sts_lightning`` from its own code root ("before": ``git archive <--old-rev>``; "after": this
checkout): ``scan`` (the first scan and cache write), ``rank`` (what a DDP rank does before its first batch, and the
first ``--check`` sentences of an epoch resumed at ``--skip`` against the uninterrupted one), ``train`` (``--steps``
CT steps; steps/s and seconds to the first step). Memory: ``VmHWM``, with ``RssAnon`` and ``RssFile`` (the mapped
index, shared by every rank) at the end. The corpus is random 4-letter words, one empty line in 10,000.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import lightning as L
import numpy as np
import torch

import sts_lightning
from benchmarks.tools.cpu_features import cpu_line
from sts_lightning.datamodules.sentence_files import SentenceIndex, load_spans
from sts_lightning.datamodules.sentence_stream import SentenceStream
from sts_lightning.datamodules.sentences import SentenceDataModule
from sts_lightning.lightning_modules.ct import ContrastiveTensionModule

ROOT = Path(__file__).resolve().parents[2]
SKIP_EVERY = 10_000  # one empty line in SKIP_EVERY


def generate(path: Path, lines: int, seed: int = 0, block: int = 2_000_000) -> None:
    """``lines`` lines of 3-7 random 4-letter words (every ``SKIP_EVERY``-th line empty), ~25 bytes a line."""
    rng = np.random.default_rng(seed)
    vocab = rng.integers(ord("a"), ord("z") + 1, size=(5000, 4), dtype=np.uint8)
    tmp = path.with_suffix(".partial")
    with tmp.open("wb") as fh:
        for first in range(0, lines, block):
            n = min(block, lines - first)
            words = rng.integers(3, 8, size=n)
            words[(first + np.arange(n)) % SKIP_EVERY == SKIP_EVERY - 1] = 0
            tokens = np.empty((int(words.sum()), 5), np.uint8)
            tokens[:, :4] = vocab[rng.integers(0, len(vocab), size=len(tokens))]
            tokens[:, 4] = ord(" ")
            tokens[np.cumsum(words[words > 0]) - 1, 4] = ord("\n")
            flat = tokens.reshape(-1)
            empty = np.flatnonzero(words == 0)  # an empty line: a "\n" inserted before its successor's words
            cuts = np.concatenate(([0], np.cumsum(words)))[empty] * 5
            fh.write(np.insert(flat, cuts, ord("\n")).tobytes())
    tmp.replace(path)


def memory() -> dict[str, float]:
    """Peak and current resident memory of this process in MiB (``/proc/self/status``)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmHWM", "RssAnon", "RssFile")}


def phase_scan(corpus: Path, cache: Path, lines: int) -> dict:
    start = time.perf_counter()
    spans, stats = load_spans(corpus, cache)
    seconds = time.perf_counter() - start
    return {"usable": len(spans), "skipped": stats["skipped"], "scan_s": seconds, "lines_per_s": lines / seconds}


def phase_rank(corpus: Path, cache: Path, skip: int, check: int, batch: int = 8) -> dict:
    start = time.perf_counter()
    stream = SentenceStream(SentenceIndex.build([corpus], cache), batch, rank=1, world_size=2, seed=7)
    stream.set_epoch(3)
    shard = stream.iter_shard(0)
    first = next(shard)
    ready_s = time.perf_counter() - start
    uninterrupted = [first, *(next(shard) for _ in range(skip * batch + check - 1))][skip * batch:]
    stream.set_epoch(3, skip_batches=skip)
    resumed = [s for s, _ in zip(stream.iter_shard(0), range(check), strict=False)]
    return {"first_batch_s": ready_s, "resumed_equals_uninterrupted": resumed == uninterrupted, "checked": check}


class Clock(L.Callback):
    """When each training step ended."""

    def __init__(self):
        self.times: list[float] = []

    def on_train_batch_end(self, *args) -> None:
        self.times.append(time.perf_counter())


def phase_train(corpus: Path, cache: Path, steps: int) -> dict:
    torch.manual_seed(0)
    clock, begun = Clock(), time.perf_counter()
    data = SentenceDataModule(None, [str(corpus)], batch_size=16, cache_dir=str(cache), seed=0)
    module = ContrastiveTensionModule("paraphrase-MiniLM-L3-v2", pairs=16, positives=2)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=steps, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                        num_sanity_val_steps=0, callbacks=[clock])
    trainer.fit(module, datamodule=data)
    t = clock.times
    return {"steps": len(t), "steps_per_s": (len(t) - 2) / (t[-1] - t[1]), "to_first_step_s": t[0] - begun}


def run_phase(code_root: Path, phase: str, args: argparse.Namespace, cache: Path) -> dict:
    """One phase in a fresh process that imports ``sts_lightning`` from ``code_root``; its result and memory."""
    env = {**os.environ, "PYTHONPATH": str(code_root), "WANDB_MODE": "disabled"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--phase", phase, "--cache", str(cache),
           "--lines", str(args.lines), "--dir", str(args.dir), "--steps", str(args.steps),
           "--skip", str(args.skip), "--check", str(args.check)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=code_root)
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def old_code(rev: str, where: Path) -> Path:
    """The code of ``rev``, unpacked once (``git archive``: no worktree or branch is created)."""
    if not (where / "sts_lightning").is_dir():
        where.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=100_000_000)
    parser.add_argument("--dir", type=Path, default=Path("/work/tmp/large_corpus"), help="corpus, caches, old code")
    parser.add_argument("--old-rev", default=None, help="'before' revision (omit: after only)")
    parser.add_argument("--sides", default="old,new")
    parser.add_argument("--phases", default="scan,rank,train")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--skip", type=int, default=1000, help="batches done before the resume")
    parser.add_argument("--check", type=int, default=1000, help="sentences compared after the resume")
    parser.add_argument("--rounds", type=int, default=1, help="repeat the phases, sides alternating in order")
    parser.add_argument("--keep-cache", action="store_true", help="reuse the sides' caches (e.g. train only)")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    corpus = args.dir / f"corpus_{args.lines}.txt"
    if args.phase:  # inside a child: one phase, one JSON line
        phases = {"scan": lambda: phase_scan(corpus, args.cache, args.lines),
                  "rank": lambda: phase_rank(corpus, args.cache, args.skip, args.check),
                  "train": lambda: phase_train(corpus, args.cache, args.steps)}
        base = memory()["VmHWM"]  # the imports (torch, transformers, lightning): the same on both sides
        result = {**phases[args.phase](), "imports_MiB": base}
        print(json.dumps({**result, **memory(), "code": str(Path(sts_lightning.__file__).parents[1])}))
        return result
    print(cpu_line(), flush=True)
    args.dir.mkdir(parents=True, exist_ok=True)
    if not corpus.is_file():
        start = time.perf_counter()
        generate(corpus, args.lines)
        print(f"generated {corpus} ({corpus.stat().st_size / 2**30:.2f} GiB) in {time.perf_counter() - start:.0f} s")
    subprocess.run(["cat", str(corpus)], stdout=subprocess.DEVNULL, check=True)  # both sides start from the page cache
    roots = {"new": ROOT}
    if args.old_rev:
        roots["old"] = old_code(args.old_rev, args.dir / f"code_{args.old_rev}")
    results: dict[str, dict] = {}
    sides = [s for s in args.sides.split(",") if s in roots]
    for r in range(args.rounds):  # machine noise hits both sides: old, new, then new, old, ...
        for side in sides if r % 2 == 0 else sides[::-1]:
            cache = args.dir / f"cache_{side}_{args.lines}"
            if not args.keep_cache:
                subprocess.run(["rm", "-rf", str(cache)], check=True)
            for phase in args.phases.split(","):
                results[f"{side}/{phase}/{r}"] = run_phase(roots[side], phase, args, cache)
                print(f"{side} {phase} (round {r}): {json.dumps(results[f'{side}/{phase}/{r}'])}", flush=True)
    return results


if __name__ == "__main__":
    main()
