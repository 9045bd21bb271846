"""Preemption (issue 30): real SIGTERM / SIGUSR1 sent to a running ``train.py``, or to ONE rank of a 2-rank run.

Every run is ``python train.py`` in a process of its own (the tiny model and data of the fault tests, 8 optimizer
steps, ``last.ckpt`` after every step). A test callback (``tests/runs/preempt_pause.py``) announces a step and
holds the signalled rank there until the signal has arrived, so the stop is checked at an exact step: the run
must stop after that step, with ``last.ckpt`` at it, exit ``EXIT_PREEMPTED`` (75) on every rank with one
``stopped:`` line, and ``ckpt_path=last`` must then end equal to the uninterrupted run (weights, step, STS, export
checksums: ``tests/runs/run_equality.py``, the fault-injection tests' comparison).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from sts_lightning.callbacks.preemption import Preemption, parse_signals, requeue_slurm_job, slurm_job_id
from sts_lightning.embeddings.errors import EXIT_PREEMPTED, ConfigError, Preempted, run_or_exit
from sts_lightning.embeddings.io.checkpoint_file import load_checkpoint
from sts_lightning.runs.train_run import resolve_ckpt_path
from tests.runs.run_equality import assert_identical, final_state, leftovers
from tests.runs.train_py import DDP, command, env, ranks, start, tails

PAUSE = "tests.runs.preempt_pause.PauseAt"


# --- the pieces, in process ---------------------------------------------------------------------------------
def test_signals_are_named_or_numbered_and_uncatchable_ones_are_refused():
    assert parse_signals(["SIGTERM", "usr1", "15"]) == [signal.SIGTERM, signal.SIGUSR1, signal.SIGTERM]
    with pytest.raises(ConfigError, match="unknown signal 'SIGFOO'"):
        parse_signals(["SIGFOO"])
    with pytest.raises(ConfigError, match="SIGKILL cannot be caught"):
        parse_signals(["SIGKILL"])
    with pytest.raises(ConfigError, match="every_n_steps must be >= 1"):
        Preemption(every_n_steps=0)


def test_a_preempted_run_prints_one_line_and_exits_75(capsys):
    def stop():
        raise Preempted("SIGTERM: stopped after optimizer step 3")

    with pytest.raises(SystemExit) as exited:
        run_or_exit(stop)
    assert exited.value.code == EXIT_PREEMPTED == 75
    assert capsys.readouterr().err == "stopped: SIGTERM: stopped after optimizer step 3\n"
    assert Preempted("x").code == 75  # uncaught (a pipeline stage, a test driver): the process still exits 75


def test_ckpt_path_last_without_a_checkpoint_says_so_and_that_it_starts_fresh(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        assert resolve_ckpt_path("last", tmp_path / "new_run") is None
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [f"ckpt_path=last: no checkpoint at {tmp_path}/new_run/checkpoints/last.ckpt (a new run "
                     "directory: to continue an earlier run, give its directory with hydra.run.dir=<run dir>)",
                     "ckpt_path=last: starting fresh from step 0"]


def test_slurm_requeue_names_the_job_and_calls_scontrol(tmp_path, monkeypatch):
    assert slurm_job_id({"SLURM_JOB_ID": "1234"}) == "1234"
    assert slurm_job_id({"SLURM_JOB_ID": "9", "SLURM_ARRAY_JOB_ID": "77", "SLURM_ARRAY_TASK_ID": "3"}) == "77_3"
    assert slurm_job_id({"SLURM_JOB_ID": "1; rm -rf /"}) is None and slurm_job_id({}) is None
    calls = tmp_path / "calls"
    fake = tmp_path / "bin" / "scontrol"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    assert requeue_slurm_job({"SLURM_JOB_ID": "1234"}) is True
    assert calls.read_text() == "requeue 1234\n"
    assert requeue_slurm_job({}) is False


@pytest.mark.parametrize(("signum", "requeued"), [(signal.SIGUSR1, True), (signal.SIGTERM, False)])
def test_under_slurm_rank_0_requeues_after_the_checkpoint_only_on_the_requeue_signal(signum, requeued, monkeypatch):
    from lightning.fabric.plugins.environments import SLURMEnvironment

    import sts_lightning.callbacks.preemption as preemption

    events = []
    saver = SimpleNamespace(save_now=lambda trainer: events.append("saved") or "/run/checkpoints/last.ckpt")
    monkeypatch.setattr(preemption, "LastCheckpoint", SimpleNamespace)
    monkeypatch.setattr(preemption, "requeue_slurm_job", lambda: events.append("requeued"))
    trainer = SimpleNamespace(global_step=5, is_global_zero=True, world_size=1, global_rank=0,
                              checkpoint_callbacks=[saver], strategy=SimpleNamespace(cluster_environment=SLURMEnvironment()))
    callback = Preemption()
    callback.received = int(signum)
    with pytest.raises(Preempted, match=f"{signum.name}: stopped after optimizer step 5, /run/checkpoints/last.ckpt"):
        callback._stop(trainer, int(signum))
    assert events == (["saved", "requeued"] if requeued else ["saved"])


# --- real signals to real train.py processes --------------------------------------------------------------------
# The runs (tests/runs/train_py.py) read the session's data folder: their resumes are compared with the session's
# uninterrupted train.py runs (tests/runs/conftest.py), which test_stopping's resumes equal too.
def _wait(procs: list[subprocess.Popen], timeout: float = 600) -> list[int]:
    return [p.wait(timeout=timeout) for p in procs]


def _pid_at_pause(markers: Path, rank: int, procs: list[subprocess.Popen], logs: list[Path]) -> int:
    deadline = time.monotonic() + 600
    while not (markers / f"rank{rank}.pid").is_file():
        if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
            raise AssertionError(f"the run ended before the pause:\n{tails(logs)}")
        time.sleep(0.1)
    return int((markers / f"rank{rank}.pid").read_text())


def _pause(step: int, markers: Path, hold: int) -> list[str]:
    markers.mkdir(parents=True, exist_ok=True)
    return [f"+callbacks.pause._target_={PAUSE}", f"+callbacks.pause.step={step}",
            f"+callbacks.pause.marker_dir={markers}", f"+callbacks.pause.hold_ranks=[{hold}]"]


def _stopped_at(out: Path) -> int:
    return load_checkpoint(out / "checkpoints" / "last.ckpt")["global_step"]


@pytest.mark.slow  # 3 train.py processes, 10-25 s each on 2 shared cores
@pytest.mark.parametrize(("signum", "step"), [(signal.SIGTERM, 2), (signal.SIGUSR1, 5)], ids=["SIGTERM", "SIGUSR1"])
def test_a_signal_to_train_py_stops_after_that_step_with_last_ckpt_exit_75_and_resumes_bit_for_bit(
        signum, step, train_py_uninterrupted, tmp_path, tiny_model_dir, run_data_dir):
    out, markers, log = tmp_path / "run", tmp_path / "markers", tmp_path / "run.log"
    proc = start(command(out, tiny_model_dir, run_data_dir, _pause(step, markers, 0)), log, env())
    pid = _pid_at_pause(markers, 0, [proc], [log])
    assert pid == proc.pid
    os.kill(pid, signum)  # arrives during optimizer step step+1
    assert proc.wait(timeout=600) == EXIT_PREEMPTED, tails([log])
    assert _stopped_at(out) == step + 1  # the step it was in when the signal came, finished and saved
    assert log.read_text().splitlines()[-1] == (
        f"stopped: {signum.name}: stopped after optimizer step {step + 1}, {out}/checkpoints/last.ckpt written; "
        f"continue with the same command plus hydra.run.dir={out} ckpt_path=last (exit code 75)")
    assert not (out / "export").exists()  # stopped, not finished: nothing exported
    resumed = start(command(out, tiny_model_dir, run_data_dir, ["ckpt_path=last"]), tmp_path / "resume.log", env())
    assert resumed.wait(timeout=600) == 0, tails([tmp_path / "resume.log"])
    assert_identical(train_py_uninterrupted, final_state(out))
    assert leftovers(out) == []


@pytest.mark.slow  # 2-rank gloo runs: 30-60 s each on 2 shared cores
def test_sigterm_to_one_rank_of_two_stops_both_at_the_same_step_exit_75_and_resumes_bit_for_bit(
        train_py_ddp_uninterrupted, tmp_path, tiny_model_dir, run_data_dir):
    out, markers, logs = tmp_path / "run", tmp_path / "markers", tmp_path / "logs"
    procs = ranks(out, tiny_model_dir, run_data_dir, _pause(2, markers, 1), logs)
    files = [logs / "rank0.log", logs / "rank1.log"]
    pid = _pid_at_pause(markers, 1, procs, files)
    assert pid == procs[1].pid
    os.kill(pid, signal.SIGTERM)  # rank 1 only; rank 0 never receives a signal
    assert _wait(procs) == [EXIT_PREEMPTED, EXIT_PREEMPTED], tails(files)
    assert _stopped_at(out) == 3
    for rank, file in enumerate(files):
        assert file.read_text().splitlines()[-1].startswith(f"stopped: rank {rank}: SIGTERM: stopped after "
                                                            "optimizer step 3"), tails(files)
    assert "SIGTERM received (on another rank): stopping after optimizer step 3" in files[0].read_text()
    procs = ranks(out, tiny_model_dir, run_data_dir, ["ckpt_path=last"], tmp_path / "resume")
    assert _wait(procs) == [0, 0], tails(sorted((tmp_path / "resume").glob("*.log")))
    assert_identical(train_py_ddp_uninterrupted, final_state(out), steps=train_py_ddp_uninterrupted["step"])
    assert leftovers(out) == []


@pytest.mark.slow  # 2-rank gloo runs: 30-60 s each on 2 shared cores
def test_sigusr1_to_the_child_rank_of_lightnings_launcher_stops_the_run_with_exit_75_and_resumes_bit_for_bit(
        train_py_ddp_uninterrupted, tmp_path, tiny_model_dir, run_data_dir):
    """``python train.py trainer.devices=2`` as a user runs it: rank 0 starts rank 1 itself; the signal goes to
    rank 1 alone (a SLURM warning to one task, a kill of one process)."""
    out, markers, log = tmp_path / "run", tmp_path / "markers", tmp_path / "run.log"
    proc = start(command(out, tiny_model_dir, run_data_dir, [*DDP, *_pause(5, markers, 1)]), log, env())
    child = _pid_at_pause(markers, 1, [proc], [log])
    assert child != proc.pid
    os.kill(child, signal.SIGUSR1)
    assert proc.wait(timeout=600) == EXIT_PREEMPTED, tails([log])
    assert _stopped_at(out) == 6
    text = log.read_text()
    assert "stopped: rank 1: SIGUSR1: stopped after optimizer step 6" in text  # rank 1 shares rank 0's stderr
    assert "stopped: rank 0: SIGUSR1: stopped after optimizer step 6" in text
    resumed = start(command(out, tiny_model_dir, run_data_dir, [*DDP, "ckpt_path=last"]), tmp_path / "resume.log", env())
    assert resumed.wait(timeout=600) == 0, tails([tmp_path / "resume.log"])
    assert_identical(train_py_ddp_uninterrupted, final_state(out), steps=train_py_ddp_uninterrupted["step"])
    assert leftovers(out) == []
