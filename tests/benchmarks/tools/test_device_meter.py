"""benchmarks/tools/device_meter.py: idle = 1 - union of device intervals / wall; CPU memory growth is seen; n/a on CPU."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from benchmarks.tools import device_meter
from benchmarks.tools.device_meter import Meter, idle_fraction, metered, union_length


def test_union_counts_overlaps_once():
    assert union_length([]) == 0
    assert union_length([(0, 2), (1, 3), (5, 6), (5.5, 5.8)]) == 4  # [0, 3] and [5, 6]
    assert union_length([(4, 5), (0, 1)]) == 2  # unsorted


def test_idle_fraction_is_the_share_of_wall_time_without_device_work():
    assert idle_fraction(0.25, 1.0) == 0.75
    assert idle_fraction(1.2, 1.0) == 0.0  # clocks round: never negative
    assert Meter(None, 1.0, "x").idle_text() == "n/a" and Meter(0.123, 1.0, "x").idle_text() == "12.3%"


def test_cpu_pass_has_no_idle_fraction_and_sees_memory_growth():
    keep = []
    meter = metered(lambda: keep.append(torch.ones(64 * 2**20 // 4)), "cpu")  # 64 MiB, touched
    assert meter.idle_fraction is None and meter.memory_kind == "CPU peak RSS growth"
    assert meter.peak_mib > 32, meter


def test_device_intervals_keep_only_device_activities():
    from torch._C._autograd import DeviceType

    def event(kind, start, end):
        return SimpleNamespace(device_type=lambda: kind, start_ns=lambda: start, end_ns=lambda: end)

    events = [event(DeviceType.CPU, 0, 100), event(DeviceType.CUDA, 10, 20), event(DeviceType.CUDA, 15, 30)]
    prof = SimpleNamespace(profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: events)))
    intervals = device_meter.device_intervals_ns(prof)
    assert intervals == [(10, 20), (15, 30)] and union_length(intervals) == 20
