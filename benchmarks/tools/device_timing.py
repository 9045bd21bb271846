"""Where a benchmark ran and how to time it there: a GPU call returns before its kernels are done.

Why its own file: every timed benchmark that takes ``--device`` needs the same two things, a clock that waits for
the device's queue (else a GPU step is timed at its launch) and a line naming the device (figures move with it).
"""

from __future__ import annotations

import torch

CPU = torch.device("cpu")


def synchronize(device: torch.device | str) -> None:
    """Wait for ``device``'s queued kernels (a no-op on the CPU)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_line(device: torch.device | str) -> str:
    """``cuda: NVIDIA H100 80GB HBM3`` or ``cpu``: what the timings were taken on."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    return device.type
