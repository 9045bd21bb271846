"""benchmarks/tools/device_meter.py: idle = 1 - union of device intervals / wall; CPU memory growth is seen; n/a on CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from benchmarks.tools import device_meter
from benchmarks.tools.device_meter import Meter, idle_fraction, union_length

ROOT = Path(__file__).resolve().parents[3]


def test_union_counts_overlaps_once():
    assert union_length([]) == 0
    assert union_length([(0, 2), (1, 3), (5, 6), (5.5, 5.8)]) == 4  # [0, 3] and [5, 6]
    assert union_length([(4, 5), (0, 1)]) == 2  # unsorted


def test_idle_fraction_is_the_share_of_wall_time_without_device_work():
    assert idle_fraction(0.25, 1.0) == 0.75
    assert idle_fraction(1.2, 1.0) == 0.0  # clocks round: never negative
    assert Meter(None, 1.0, "x").idle_text() == "n/a" and Meter(0.123, 1.0, "x").idle_text() == "12.3%"


def test_cpu_pass_has_no_idle_fraction_and_sees_memory_growth():
    """In a fresh process: a long-lived one (a pytest-xdist worker) may hand the 64 MiB back from memory an earlier
    test freed but the allocator kept resident, which is growth the meter rightly does not see."""
    code = ("import json, torch; from benchmarks.tools.device_meter import metered; keep = []; "
            "m = metered(lambda: keep.append(torch.ones(64 * 2**20 // 4)), 'cpu'); "  # 64 MiB, touched
            "print(json.dumps([m.idle_fraction, m.memory_kind, m.peak_mib]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    idle, kind, peak_mib = json.loads(out.splitlines()[-1])
    assert idle is None and kind == "CPU peak RSS growth"
    assert peak_mib > 32, out


def test_device_intervals_keep_only_device_activities():
    from torch._C._autograd import DeviceType

    def event(kind, start, end):
        return SimpleNamespace(device_type=lambda: kind, start_ns=lambda: start, end_ns=lambda: end)

    events = [event(DeviceType.CPU, 0, 100), event(DeviceType.CUDA, 10, 20), event(DeviceType.CUDA, 15, 30)]
    prof = SimpleNamespace(profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: events)))
    intervals = device_meter.device_intervals_ns(prof)
    assert intervals == [(10, 20), (15, 30)] and union_length(intervals) == 20
