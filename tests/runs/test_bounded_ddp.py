"""``runs/bounded_ddp.py`` in one process: the strategy, and which errors count as a lost rank (with what line).

The real kills and hangs of a rank are in ``tests/runs/test_dying_rank.py`` (slow: 2-rank runs).
"""

from __future__ import annotations

from datetime import timedelta

import torch.distributed as dist
from lightning.pytorch.strategies import DDPStrategy

from sts_lightning.runs.bounded_ddp import BoundedDDPStrategy, _lost_cause, how_it_ended, lost_rank_message

GLOO_RESET = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:50857: "
              "Connection reset by peer. This is typically caused by a remote worker hanging or bugs in the "
              "application. Check the logs of the remote worker before reporting an error. GLHF!")
GLOO_TIMEOUT = ("[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 30000ms for recv "
                "operation to complete")


def test_the_bounded_strategy_is_lightnings_ddp_with_the_timeout():
    strategy = BoundedDDPStrategy(collective_timeout_s=60)
    assert isinstance(strategy, DDPStrategy) and strategy._timeout == timedelta(seconds=60)
    assert strategy.collective_timeout_s == 60.0


def test_a_dead_or_silent_peer_is_a_lost_rank_and_other_errors_are_not():
    assert _lost_cause(RuntimeError(GLOO_RESET)) == "Read error [127.0.0.1]:50857: Connection reset by peer"
    assert _lost_cause(RuntimeError(GLOO_TIMEOUT)).startswith("Timed out waiting 30000ms")
    assert _lost_cause(dist.DistBackendError("NCCL communicator was aborted on rank 1")) is not None
    try:
        try:
            raise RuntimeError(GLOO_RESET)
        except RuntimeError as inner:
            raise ValueError("wrapped") from inner
    except ValueError as outer:
        assert _lost_cause(outer) is not None  # found through the cause chain
    assert _lost_cause(RuntimeError("DataLoader timed out after 5 seconds")) is None  # not a collective
    assert _lost_cause(RuntimeError("CUDA out of memory")) is None
    assert _lost_cause(ValueError("Connection reset by peer")) is None  # not torch's


def test_the_line_names_the_rank_how_it_ended_the_step_and_the_resume():
    assert how_it_ended(-9) == "died (killed by SIGKILL, as the OOM killer does)"
    assert how_it_ended(-15) == "died (killed by SIGTERM)"
    assert how_it_ended(2) == "died (exit code 2)"
    line = lost_rank_message(1, how_it_ended(-9), 0, 2, 3, "Resume with ...")
    assert line == ("rank 1 of 2 died (killed by SIGKILL, as the OOM killer does) at step 3; rank 0 stopped too "
                    "(exit 69). Resume with ...")
    assert lost_rank_message(None, "is gone (x)", 2, 4, None, "").startswith("another rank of 4 is gone (x);")
    assert "\n" not in line


def test_a_lost_peer_after_this_rank_was_signalled_is_a_stop_with_exit_75(tmp_path):
    import signal
    from types import SimpleNamespace

    import pytest

    from sts_lightning.embeddings import stop_request
    from sts_lightning.embeddings.errors import EXIT_PREEMPTED
    from sts_lightning.runs.bounded_ddp import stop_on_lost_rank

    trainer = SimpleNamespace(world_size=2, global_rank=1, global_step=0, strategy=SimpleNamespace())
    stop_request.request(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as stopped, stop_on_lost_rank(trainer, tmp_path):
            raise RuntimeError(GLOO_RESET)
    finally:
        stop_request.clear()
    assert stopped.value.code == EXIT_PREEMPTED
    assert str(stopped.value).startswith("rank 1: SIGTERM; another rank stopped first (Read error")
    assert f"hydra.run.dir={tmp_path} ckpt_path=last" in str(stopped.value)


def test_rank_0_of_a_preempted_run_waits_for_its_child_ranks_and_kills_one_that_hangs():
    import subprocess
    import sys
    import time

    from sts_lightning.runs.bounded_ddp import wait_for_children

    quick = subprocess.Popen([sys.executable, "-c", "raise SystemExit(75)"])
    stuck = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started = time.monotonic()
    wait_for_children([quick, stuck], grace_s=3)
    assert quick.returncode == 75 and stuck.wait(timeout=10) == -9
    assert time.monotonic() - started < 15
