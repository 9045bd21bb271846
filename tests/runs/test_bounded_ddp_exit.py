"""``runs/bounded_ddp.py``: after a clean ``train()`` the process group is destroyed and gloo's worker threads are joined
before Python's teardown (where one still releasing a Python tensor aborts the process: exit -6).

The race itself is timing-dependent (3 aborts in 20 two-rank runs on 2 cores); what is deterministic, and tested here,
is that the handler leaves no gloo worker thread behind, even while a garbage cycle still holds the group, and that
it leaves the group alone after a run that did not end cleanly. The 2-rank runs of ``tests/runs/test_ddp_train.py``
and ``tests/runs/test_preemption.py`` exercise the whole path.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch.distributed as dist

from sts_lightning.runs import bounded_ddp


def gloo_workers() -> int:
    """Threads named by torch's gloo process group (its work loop), read from the kernel's thread list."""
    return sum(1 for comm in Path("/proc/self/task").glob("*/comm") if comm.read_text().strip() == "pt_gloo_runloop")


def named_workers(timeout_s: float = 10.0) -> int:
    """``gloo_workers()`` once they are there: each thread names itself after it starts, a moment after the group."""
    deadline = time.monotonic() + timeout_s
    while not gloo_workers() and time.monotonic() < deadline:
        time.sleep(0.01)
    return gloo_workers()


@pytest.fixture(autouse=True)
def no_group_from_earlier_tests():
    """Start from a process without a group: an in-process ``train()`` with ``strategy=ddp`` earlier in this process
    (another file, in the same pytest-xdist worker) keeps its group until exit, by design (``release_group_at_exit``)."""
    if dist.is_initialized():
        dist.destroy_process_group()
    bounded_ddp.group_in_use()
    yield


@pytest.fixture()
def one_rank_group(tmp_path):
    if not Path("/proc/self/task").is_dir():
        pytest.skip("needs /proc to count threads")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'init'}", rank=0, world_size=1)
    try:
        yield
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        bounded_ddp.group_in_use()


class HoldsTheGroup:
    """A cycle (as a trainer and its DDP wrapper form) that keeps the group alive until the garbage collector runs."""

    def __init__(self):
        self.group = dist.distributed_c10d._get_default_group()
        self.me = self


def test_a_clean_run_leaves_no_gloo_worker_behind(one_rank_group):
    box = [7]
    dist.broadcast_object_list(box, src=0)  # a collective whose tensors were made in Python
    HoldsTheGroup()
    assert named_workers() > 0
    bounded_ddp.release_group_at_exit()
    bounded_ddp.release_group()
    assert not dist.is_initialized()
    assert gloo_workers() == 0


def test_a_run_that_did_not_end_cleanly_keeps_its_group(one_rank_group):
    bounded_ddp.release_group_at_exit()  # an earlier train() ended cleanly
    bounded_ddp.group_in_use()  # the next one started and did not return
    bounded_ddp.release_group()
    assert dist.is_initialized() and named_workers() > 0


def test_nothing_to_release_without_a_group():
    assert not dist.is_initialized()
    bounded_ddp.release_group_at_exit()
    bounded_ddp.release_group()  # no error, nothing registered to do
    assert not dist.is_initialized()
