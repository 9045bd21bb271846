"""benchmarks/tools/device_timing.py: a GPU clock waits for the device's queue; the device line names the card."""

from __future__ import annotations

import torch

from benchmarks.tools.device_timing import device_line, synchronize


def test_cpu_needs_no_wait_and_is_named_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: (_ for _ in ()).throw(AssertionError("no CUDA wait")))
    synchronize("cpu")
    assert device_line(torch.device("cpu")) == "cpu"


def test_cuda_waits_for_its_queue_and_names_the_card(monkeypatch):
    waited = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waited.append(device))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    synchronize("cuda:0")
    assert waited == [torch.device("cuda:0")]
    assert device_line("cuda") == "cuda: NVIDIA H100 80GB HBM3"
