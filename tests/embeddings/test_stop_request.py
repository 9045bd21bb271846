"""The stop flag: a real signal is only recorded; ``check_stop`` raises it as exit 75 where a loop asks."""

from __future__ import annotations

import os
import signal

import pytest

from sts_lightning.embeddings import stop_request
from sts_lightning.embeddings.errors import EXIT_PREEMPTED, Preempted
from sts_lightning.embeddings.stop_request import StopRequested, check_stop, listening, stretch


def test_a_real_signal_is_recorded_and_raised_at_the_next_check_then_the_old_handler_is_back():
    before = signal.getsignal(signal.SIGUSR1)
    with pytest.raises(StopRequested) as stopped, listening([signal.SIGUSR1]):
        check_stop()  # nothing received: no-op
        os.kill(os.getpid(), signal.SIGUSR1)
        stop_request.request(signal.SIGTERM)  # a second one keeps the first
        assert stop_request.received() == signal.SIGUSR1
        check_stop("caching features")
    assert isinstance(stopped.value, Preempted) and stopped.value.code == EXIT_PREEMPTED
    assert str(stopped.value) == "SIGUSR1 while caching features"
    # a stop keeps the recording handler (the process is on its way out); a clean end restores the old one
    assert signal.getsignal(signal.SIGUSR1) is not before
    with listening([signal.SIGUSR1]):
        pass
    assert stop_request.received() == 0
    stop_request.restore({signal.SIGUSR1: before})


def test_the_stretch_names_the_phase_and_its_agreement_decides_for_every_rank():
    asked = []

    def another_rank_was_signalled(local: int) -> int:
        asked.append(local)
        return int(signal.SIGTERM)

    with stretch("scoring STS"):
        check_stop()  # this process received nothing, and nobody else is asked
        with stretch("scoring STS", another_rank_was_signalled), pytest.raises(StopRequested) as stopped:
            check_stop()
    assert asked == [0] and str(stopped.value) == "SIGTERM while scoring STS"
    check_stop()  # outside the stretch: this process's own flag again
    stop_request.clear()


def test_describe_sets_the_one_line_once():
    stop = StopRequested(signal.SIGTERM)
    stop.describe("first")
    stop.describe("second")
    assert str(stop) == "first"
