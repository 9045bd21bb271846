"""The console of a run: Lightning lines once, no adverts, progress lines off a terminal."""

from __future__ import annotations

import io
import logging
import re
import signal
import time

import lightning.pytorch  # noqa: F401  (adds Lightning's own console handlers, as in a real run)
import pytest

from sts_lightning.embeddings import stop_request
from sts_lightning.embeddings.console import Phase, _logged, configure_console, phase, progress, progress_line
from sts_lightning.embeddings.stop_request import StopRequested, stretch


def test_lightning_lines_once_and_no_adverts():
    root = logging.getLogger()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root.addHandler(handler)
    try:
        configure_console()
        logging.getLogger("lightning.fabric.utilities.seed").info("Seed set to 42")
        logging.getLogger("lightning.pytorch.utilities.rank_zero").info(
            "💡 Tip: For seamless cloud logging, try installing [litlogger](https://pypi.org/project/litlogger/)")
        logging.getLogger("lightning.pytorch.utilities.rank_zero").info("GPU available: False, used: False")
    finally:
        root.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert lines.count("Seed set to 42") == 1 and "GPU available: False, used: False" in lines
    assert not any("litlogger" in line for line in lines)
    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        assert not [h for h in logging.getLogger(name).handlers if type(h) is logging.StreamHandler]


def test_progress_lines_off_a_terminal(caplog):
    with caplog.at_level(logging.INFO, logger="sts_lightning.embeddings.console"):
        assert list(_logged(range(3), "encode", 3, "batch", every_s=1e-9)) == [0, 1, 2]
    assert "encode: 3/3 batch (100%)" in caplog.text
    assert list(progress(range(4), "x", disable=True)) == [0, 1, 2, 3]  # pytest's capture is no terminal


def test_a_phase_says_it_started_before_its_first_item(caplog):
    """A loop shorter than ``every_s`` was silent: its first line came only after 30 s."""
    seen = []
    with caplog.at_level(logging.INFO, logger="sts_lightning.embeddings.console"):
        for item in _logged(iter(range(2)), "caching", None, "batch", every_s=60):
            seen.append((item, caplog.text))
    assert "caching: started" in seen[0][1]
    with caplog.at_level(logging.INFO, logger="sts_lightning.embeddings.console"):
        next(_logged(range(5), "encode", 5, "batch", every_s=60))
    assert "encode: 5 batch to go" in caplog.text


def test_progress_line_format():
    assert progress_line("train", 120, 400, 62.0, "steps") == "train: 120/400 steps (30%), 1m02s elapsed, ~2m25s left"
    assert progress_line("read", 5, None, 3725.0) == "read: 5 batch, 1h02m elapsed"


def _counts(text: str, desc: str) -> list[tuple[int, int]]:
    """(done, total) of every counter line of ``desc`` in a log."""
    found = re.findall(rf"^{re.escape(desc)}: ([\d,]+)/([\d,]+) ", text, flags=re.M)
    return [(int(d.replace(",", "")), int(t.replace(",", ""))) for d, t in found]


def test_a_phase_of_several_parts_is_one_monotone_counter(caplog):
    """Each chunk's loop used to count to 128/128 (100%) and restart; in a phase it feeds the one counter."""
    with caplog.at_level(logging.INFO, logger="sts_lightning.embeddings.console"):
        with phase("caching", 25, every_s=0) as counter:
            for size in (10, 10):
                with counter.part(size):
                    assert list(progress(range(4), "encode", unit="batch")) == [0, 1, 2, 3]
            with counter.part(5):
                pass  # read from a cache: done, but no work to extrapolate from
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert [line for line in text.splitlines() if "to go" in line] == ["caching: 25 sentences to go"]
    assert "encode" not in text  # the inner loops printed nothing of their own
    counts = _counts(text, "caching")
    assert {total for _, total in counts} == {25} and len(counts) >= 8
    assert [done for done, _ in counts] == sorted(done for done, _ in counts) and counts[-1] == (25, 25)
    assert counter.skipped == 5
    assert "caching: 20/25 sentences (80%)" in text and ", ~" in text


def test_a_phase_line_extrapolates_from_computed_work_only():
    counter = Phase.__new__(Phase)
    counter.desc, counter.total, counter.unit, counter.done, counter.skipped = "x", 40, "sentences", 20.0, 10.0
    assert counter.line(30.0) == "x: 20/40 sentences (50%), 0m30s elapsed, ~1m00s left"  # 10 computed in 30 s


def test_a_phase_logs_while_one_batch_runs_long_and_stops_between_batches(caplog):
    """Issue 48: one e5 batch took 31-54 s and the phase printed nothing meanwhile; a SIGTERM waited for the whole
    teacher because that engine's loop checked nothing."""
    ran = []
    with caplog.at_level(logging.INFO, logger="sts_lightning.embeddings.console"):
        with pytest.raises(StopRequested) as stopped, stretch("encoding a teacher"), \
                phase("teachers", 30, every_s=1) as counter:
            with counter.part(30):
                for item in progress(range(3), "slow engine"):
                    ran.append(item)
                    time.sleep(2.2)  # one long batch: the heartbeat logs meanwhile
                    stop_request.request(signal.SIGTERM)
    assert ran == [0] and str(stopped.value) == "SIGTERM while encoding a teacher"
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("teachers: 0/30")]
    assert len(lines) >= 1  # during the long first batch, nothing done yet


def test_the_last_count_of_a_loop_is_logged_once(caplog):
    with caplog.at_level(logging.INFO, logger="sts_lightning.embeddings.console"):
        list(_logged(range(3), "encode", 3, "batch", every_s=1e-9))
    assert sum("encode: 3/3 batch" in r.getMessage() for r in caplog.records) == 1


def test_a_plain_loop_logs_while_one_item_runs_long(caplog):
    """The STS scoring's first batch (the longest sentences) ran 17 s with no line at load 6."""
    with caplog.at_level(logging.INFO, logger="sts_lightning.embeddings.console"):
        for _ in _logged(range(2), "scoring", 2, "batch", every_s=1):
            time.sleep(1.6)
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("scoring: 0/2 batch") for line in lines)  # during the first item
    assert sum(line.startswith("scoring: 2/2 batch") for line in lines) == 1
