"""How much a run left the device idle, and how much memory it took: one metered, untimed pass of a callable.

Why a separate pass: the profiler and a memory sampler cost time themselves, so the speed figures come from the
timed runs and these two from one more run of the same work.

* Idle fraction (CUDA): ``1 - busy / wall``, ``busy`` the length of the union of every device activity's interval
  (``torch.profiler``, CUDA activity only), ``wall`` the host's clock to the device's last kernel: the time the GPU
  waited for the host. On a CPU: ``None`` ("n/a").
* Peak memory above the pass's start (not the weights, nor another side's model): CUDA ``max_memory_allocated``
  minus ``memory_allocated`` at the start; on a CPU the resident set's growth, sampled every 2 ms.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from benchmarks.tools.device_timing import synchronize

MIB = 2**20


@dataclass(frozen=True)
class Meter:
    idle_fraction: float | None  # None: not measurable on this device (a CPU)
    peak_mib: float
    memory_kind: str  # what peak_mib is

    def idle_text(self) -> str:
        return "n/a" if self.idle_fraction is None else f"{100 * self.idle_fraction:.1f}%"

    def as_dict(self) -> dict:
        return {"idle_fraction": self.idle_fraction, "peak_mib": round(self.peak_mib, 1), "memory": self.memory_kind}


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by ``(start, end)`` intervals, overlaps counted once (kernels on several streams)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def idle_fraction(busy_s: float, wall_s: float) -> float:
    """Share of ``wall_s`` the device spent with nothing to do (clamped to [0, 1]: clocks round)."""
    return min(1.0, max(0.0, 1.0 - busy_s / wall_s)) if wall_s > 0 else 0.0


def device_intervals_ns(prof) -> list[tuple[int, int]]:
    """(start, end) in ns of every device-side activity a ``torch.profiler.profile`` recorded."""
    from torch._C._autograd import DeviceType

    results = getattr(prof.profiler, "kineto_results", None)
    if results is None:
        return []
    return [(e.start_ns(), e.end_ns()) for e in results.events() if e.device_type() != DeviceType.CPU]


class RssSampler:
    """Peak growth of this process's resident set while it runs (a daemon thread reading ``/proc/self/statm``)."""

    def __init__(self, every_s: float = 0.002) -> None:
        self.every_s, self.page = every_s, os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self.start = self.peak = self.rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rss(self) -> int:
        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * self.page
        except OSError:  # no procfs (macOS): the high-water mark, in KiB on Linux-like systems
            import resource

            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.peak = max(self.peak, self.rss())

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())

    @property
    def growth_mib(self) -> float:
        return (self.peak - self.start) / MIB


def metered(fn: Callable[[], object], device: torch.device | str) -> Meter:
    """Run ``fn`` once more, under the profiler (CUDA) or the RSS sampler (CPU); its idle fraction and peak memory."""
    device = torch.device(device)
    if device.type != "cuda":
        with RssSampler() as sampler:
            fn()
        return Meter(None, sampler.growth_mib, "CPU peak RSS growth")
    from torch.profiler import ProfilerActivity, profile

    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.memory_allocated(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        wall = time.perf_counter() - t0
    busy = union_length(device_intervals_ns(prof)) / 1e9
    return Meter(idle_fraction(busy, wall), (torch.cuda.max_memory_allocated(device) - start) / MIB,
                 "CUDA peak allocated above the pass's start")
