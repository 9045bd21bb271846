"""End-to-end training throughput of a real ``train.py`` run: steps/s, real tokens/s, MFU and the GPU's idle share.

Why a callback given on the command line: the end-to-end figure must include everything a user's run does between
two steps (DataLoader, collate, logging, callbacks), so it is measured inside that run, with no change to the product:

    python train.py model=simcse trainer=gpu +callbacks.step_meter._target_=benchmarks.speed.step_meter.StepMeter \\
        +callbacks.step_meter.out=<file.jsonl> +callbacks.step_meter.run=simcse

Steps before ``skip`` warm up; the next ``profile_steps`` run under ``torch.profiler`` for the idle fraction
(``tools/device_meter.py``); the steps after are timed on the host's clock (device synchronised only at the window's
ends; validations left out). Tokens: every sentence of the timed batches as the module's encoder tokenizes them.
MFU: ``tools/mfu.py``, against a matmul in the trainer's precision measured at the end of the run.
"""

from __future__ import annotations

import time

import lightning as L
import torch

from benchmarks.gpu.gpu_figures import append_record
from benchmarks.speed.train_batches import MLM_PROBABILITY
from benchmarks.tools.device_meter import device_intervals_ns, idle_fraction, union_length
from benchmarks.tools.device_timing import synchronize
from benchmarks.tools.mfu import dtype_of, matmul_peak, training_flops
from sts_lightning.lightning_modules.mlm import MLMModule
from sts_lightning.lightning_modules.simcse import SimCSEModule


def batch_lengths(batch: dict, tokenizer, max_length: int, views: int = 1) -> list[int]:
    """Real token counts of every sequence a step encodes: from attention masks if the batch has them, else by
    tokenizing its string lists; each repeated ``views`` times."""
    masks = [v for k, v in batch.items() if torch.is_tensor(v) and "attention_mask" in k]
    if masks:
        lengths = [int(n) for m in masks for n in m.reshape(-1, m.shape[-1]).sum(-1).tolist()]
    else:
        texts = [s for v in batch.values() if isinstance(v, (list, tuple)) for s in v if isinstance(s, str)]
        ids = tokenizer(texts, truncation=True, max_length=max_length, add_special_tokens=True,
                        return_attention_mask=False, return_token_type_ids=False)["input_ids"] if texts else []
        lengths = [len(x) for x in ids]
    return lengths * views


class StepMeter(L.Callback):
    """Measure steps/s, tokens/s, MFU and GPU idle of the run; append one JSON line to ``out`` (rank 0).

    Args:
        out: the JSON-lines file (``benchmarks/gpu/gpu_figures.py`` reads it).
        run: the label of the run in the table (quickstart, simcse, mlm).
        skip: warm-up steps, not measured.
        profile_steps: steps under the profiler (idle fraction), not timed.
    """

    def __init__(self, out: str, run: str = "train.py", skip: int = 5, profile_steps: int = 5) -> None:
        self.out, self.run, self.skip, self.profile_steps = out, run, int(skip), int(profile_steps)
        self.seen = 0
        self.batches: list[dict] = []
        self.intervals: list[float] = []
        self._last: float | None = None
        self._prof = None
        self._prof_start = 0.0
        self.idle: float | None = None

    def _timed_from(self) -> int:
        return self.skip + self.profile_steps

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        device = pl_module.device
        if self.seen == self.skip and device.type == "cuda" and self.profile_steps:
            from torch.profiler import ProfilerActivity, profile

            synchronize(device)
            self._prof = profile(activities=[ProfilerActivity.CUDA])
            self._prof.__enter__()
            self._prof_start = time.perf_counter()
        if self.seen == self._timed_from():
            synchronize(device)
            if self._prof is not None:
                wall = time.perf_counter() - self._prof_start
                self._prof.__exit__(None, None, None)
                self.idle = idle_fraction(union_length(device_intervals_ns(self._prof)) / 1e9, wall)
                self._prof = None
            self._last = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        self.seen += 1
        if self._last is None:
            return
        now = time.perf_counter()
        self.intervals.append(now - self._last)
        self.batches.append(batch)
        self._last = now

    def on_validation_end(self, trainer, pl_module) -> None:
        if self._last is not None:  # the next interval starts after the validation: its time is not a step's
            self._last = time.perf_counter()

    def on_train_end(self, trainer, pl_module) -> None:
        if self._prof is not None:  # the run ended inside the profiled steps
            self._prof.__exit__(None, None, None)
            self._prof = None
        synchronize(pl_module.device)
        if self.intervals and self._last is not None:  # the last step's queued work, up to now
            self.intervals[-1] += time.perf_counter() - self._last
        keep = list(zip(self.intervals, self.batches, strict=True))
        if not keep or not trainer.is_global_zero:
            return
        record = self.figures(trainer, pl_module, keep)
        append_record(self.out, record)
        print(f"step meter {self.run}: {record['steps']} steps, {record['steps_per_s']:.2f} steps/s, "
              f"{record['tokens_per_s']:.0f} tokens/s, MFU {record['mfu']:.3f}, idle "
              f"{'n/a' if self.idle is None else f'{100 * self.idle:.1f}%'}")

    def figures(self, trainer, pl_module, keep: list) -> dict:
        encoder = pl_module.encoder
        views = 2 if isinstance(pl_module, SimCSEModule) and pl_module.hparams.objective == "unsupervised" else 1
        seconds = sum(t for t, _ in keep)
        lengths = [batch_lengths(b, encoder.tokenizer, encoder.max_length, views) for _, b in keep]
        predicted = MLM_PROBABILITY if isinstance(pl_module, MLMModule) else 0.0
        config = encoder.model.config
        flops = sum(training_flops(config, n, predicted * sum(max(x - 2, 0) for x in n)) for n in lengths)
        precision = str(trainer.precision)
        peak = matmul_peak(pl_module.device, dtype_of(precision))
        tokens = sum(sum(n) for n in lengths)
        return {"bench": "e2e", "run": self.run, "precision": precision, "steps": len(keep),
                "steps_per_s": len(keep) / seconds, "tokens_per_s": tokens / seconds, "tokens_per_step": tokens / len(keep),
                "mfu": flops / seconds / peak, "peak_tflops": peak / 1e12, "idle_fraction": self.idle,
                "world_size": trainer.world_size}
