"""The CPU a benchmark ran on, in one line: its figures move with the SIMD width (AVX2 vs AVX-512)."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_line() -> str:
    """``cpu: <model>, N cores, avx512 yes|no, avx512_bf16 yes|no`` (from ``/proc/cpuinfo`` where it exists)."""
    info = Path("/proc/cpuinfo")
    text = info.read_text() if info.is_file() else ""
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")),
                 platform.processor() or "unknown")
    flags = set(next((line for line in text.splitlines() if line.startswith("flags")), "").split())
    avx512 = "yes" if any(f.startswith("avx512") for f in flags) else "no"
    bf16 = "yes" if "avx512_bf16" in flags else "no"
    return f"cpu: {model}, {os.cpu_count()} cores, avx512 {avx512}, avx512_bf16 {bf16}"
