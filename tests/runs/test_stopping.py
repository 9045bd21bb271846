"""A SIGTERM / SIGUSR1 in every phase of ``train.py`` (issue 38): before training, at a validation, at the end
scoring, during a cache build and during the export -- exit 75 within seconds, the right ``last.ckpt`` (or none
before step 1), the one ``stopped:`` line, nothing half-written, and a resume equal to the uninterrupted run.

Every run is ``python -m tests.runs.fault_driver --script train.py`` (``train.py`` as a user runs it) with the tiny
model and data of the preemption tests: 8 optimizer steps, an STS evaluation before training (evaluation 1), after
each epoch (2: after step 4; 3: the end, after step 8). ``tests/runs/phase_pause.py`` holds the run at a stop check
of the phase until the test's real signal has arrived; the seconds from the signal to the exit are printed
(``-s``) and bounded loosely (the work after the stop -- one checkpoint, Lightning's teardown -- is under a few
seconds here; the bound only catches a stop that waits for the phase to end).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from sts_lightning.embeddings import stop_request
from sts_lightning.embeddings.errors import EXIT_PREEMPTED
from sts_lightning.embeddings.io.checkpoint_file import load_checkpoint
from sts_lightning.embeddings.stop_request import StopRequested
from sts_lightning.runs.stopping import describe_stop, export_on_rank_zero, preemption_signals
from tests.runs.run_equality import assert_identical, final_state, leftovers
from tests.runs.train_py import FAULT_DRIVER, command, env, ranks, start

SECONDS_TO_EXIT = 30.0  # loose: a stop that waited for the phase to end would blow it only on a slow phase


# --- the pieces, in process ---------------------------------------------------------------------------------
def test_train_listens_to_the_preemption_callbacks_signals_and_to_none_without_it():
    cfg = OmegaConf.create({"callbacks": {"preemption": {"_target_": "x", "signals": ["SIGUSR1"]}}})
    assert preemption_signals(cfg) == [signal.SIGUSR1]
    assert preemption_signals(OmegaConf.create({"callbacks": {"preemption": None}})) == []
    assert preemption_signals(OmegaConf.create({})) == []


def test_a_stop_outside_the_fit_names_the_checkpoint_or_says_there_is_none(tmp_path):
    stop = StopRequested(signal.SIGTERM, "building the model")
    describe_stop(stop, tmp_path, None)
    assert str(stop) == (f"SIGTERM while building the model: stopped before the first optimizer step, nothing to save; "
                         f"continue with the same command plus hydra.run.dir={tmp_path} ckpt_path=last (exit code 75)")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"x")
    stop = StopRequested(signal.SIGUSR1, "writing the export")
    describe_stop(stop, tmp_path, "last")
    assert str(stop).startswith(f"SIGUSR1 while writing the export: stopped, {tmp_path}/checkpoints/last.ckpt holds "
                                "the last finished optimizer step (training had finished: the resumed run writes the "
                                "export); continue with")


def test_the_export_stops_at_its_check_on_rank_0_and_every_rank_raises():
    trainer = SimpleNamespace(is_global_zero=True, strategy=SimpleNamespace(broadcast=lambda obj, src: obj))
    written = []
    with stop_request.listening([]):
        export_on_rank_zero(trainer, lambda: written.append(1))
        assert written == [1]
        stop_request.request(signal.SIGTERM)
        with pytest.raises(StopRequested, match="SIGTERM while writing the export") as stopped:
            export_on_rank_zero(trainer, lambda: written.append(2))
    assert written == [1] and stopped.value.code == EXIT_PREEMPTED
    other = SimpleNamespace(is_global_zero=False, strategy=SimpleNamespace(broadcast=lambda obj, src: 15))
    with pytest.raises(StopRequested, match=r"SIGTERM while writing the export \(on rank 0\)"):
        export_on_rank_zero(other, lambda: None)
    stop_request.clear()


# --- real signals to real train.py processes --------------------------------------------------------------------
# Each run is train.py through the fault driver (FAULT_PAUSE holds it in a phase), on the session's data folder:
# its resume is compared with the session's uninterrupted train.py run (tests/runs/conftest.py).
def _command(out: Path, model_dir: Path, data_dir: Path, extra: list[str]) -> list[str]:
    return command(out, model_dir, data_dir, extra, FAULT_DRIVER)


def _signal_in_phase(cmd: list[str], phase: str, n: int, tmp_path: Path, signum=signal.SIGTERM) -> tuple[int, float]:
    """Run ``cmd`` held in ``phase`` (evaluation ``n``), signal it there: (exit code, seconds from signal to exit)."""
    markers, log = tmp_path / "markers", tmp_path / "run.log"
    proc = start(cmd, log, env(FAULT_PAUSE=f"{phase}:{n}:0", FAULT_PAUSE_DIR=str(markers)))
    deadline = time.monotonic() + 600
    while not (markers / "rank0.pid").is_file():
        assert proc.poll() is None and time.monotonic() < deadline, f"ended before {phase}:\n{log.read_text()[-3000:]}"
        time.sleep(0.05)
    assert int((markers / "rank0.pid").read_text()) == proc.pid
    sent = time.monotonic()
    os.kill(proc.pid, signum)
    code = proc.wait(timeout=600)
    seconds = time.monotonic() - sent
    print(f"\n{phase} #{n}: {signal.Signals(signum).name} -> exit {code} after {seconds:.2f} s")
    return code, seconds


def _last_line(tmp_path: Path) -> str:
    return (tmp_path / "run.log").read_text().splitlines()[-1]


def _resume(out: Path, model_dir: Path, data_dir: Path, tmp_path: Path, extra: list[str] = ()) -> dict:
    log = tmp_path / "resume.log"
    proc = start(_command(out, model_dir, data_dir, [*extra, "ckpt_path=last"]), log, env())
    assert proc.wait(timeout=600) == 0, log.read_text()[-3000:]
    return final_state(out)


@pytest.mark.slow  # 2 train.py processes, 10-25 s each on 2 shared cores
def test_sigterm_while_scoring_sts_before_training_exits_75_with_nothing_to_save_and_the_command_starts_again(
        train_py_uninterrupted, tmp_path, tiny_model_dir, run_data_dir):
    out = tmp_path / "run"
    code, seconds = _signal_in_phase(_command(out, tiny_model_dir, run_data_dir, []), "scoring STS", 1, tmp_path)
    assert code == EXIT_PREEMPTED and seconds < SECONDS_TO_EXIT, _last_line(tmp_path)
    assert _last_line(tmp_path) == (
        "stopped: SIGTERM while scoring STS: stopped before the first optimizer step, nothing to save; continue with "
        f"the same command plus hydra.run.dir={out} ckpt_path=last (exit code 75)")
    assert not list(out.rglob("*.ckpt")) and not (out / "export").exists()
    assert_identical(train_py_uninterrupted, _resume(out, tiny_model_dir, run_data_dir, tmp_path))
    assert leftovers(out) == []


@pytest.fixture(scope="module")
def uninterrupted_max_steps(tmp_path_factory, tiny_model_dir, run_data_dir) -> dict:
    out = tmp_path_factory.mktemp("uninterrupted_max_steps")
    log = out.parent / f"{out.name}.log"
    proc = start(_command(out, tiny_model_dir, run_data_dir, ["trainer.max_steps=8"]), log, env())
    assert proc.wait(timeout=600) == 0, log.read_text()
    return final_state(out)


@pytest.mark.slow  # 2 train.py processes, 10-25 s each on 2 shared cores
@pytest.mark.parametrize(("n", "step", "signum", "extra"), [(2, 4, signal.SIGTERM, []), (3, 8, signal.SIGUSR1, []),
                                                            (3, 8, signal.SIGTERM, ["trainer.max_steps=8"])],
                         ids=["validation", "end-scoring", "end-scoring-at-max-steps"])
def test_a_signal_during_a_validation_saves_that_step_marked_mid_evaluation_and_resumes_bit_for_bit(
        n, step, signum, extra, request, tmp_path, tiny_model_dir, run_data_dir):
    """At ``max_steps`` the resumed fit has nothing left to train (Lightning runs no training hook): the STS
    callback's ``on_fit_end`` scores the final weights instead of the validation run again."""
    uninterrupted = request.getfixturevalue("uninterrupted_max_steps" if extra else "train_py_uninterrupted")
    out = tmp_path / "run"
    code, seconds = _signal_in_phase(_command(out, tiny_model_dir, run_data_dir, extra), "scoring STS", n, tmp_path,
                                     signum)
    assert code == EXIT_PREEMPTED and seconds < SECONDS_TO_EXIT, _last_line(tmp_path)
    assert _last_line(tmp_path) == (
        f"stopped: {signum.name} while scoring STS: stopped after optimizer step {step}, {out}/checkpoints/last.ckpt "
        f"written (its validation runs again); continue with the same command plus hydra.run.dir={out} ckpt_path=last"
        " (exit code 75)")
    saved = load_checkpoint(out / "checkpoints" / "last.ckpt")
    assert saved["global_step"] == step
    assert not (out / "export").exists() and not (out / "sts_before_after.md").exists()
    assert_identical(uninterrupted, _resume(out, tiny_model_dir, run_data_dir, tmp_path, extra))
    assert leftovers(out) == []


@pytest.mark.slow  # 2 train.py processes, 10-25 s each on 2 shared cores
def test_sigterm_during_the_export_leaves_no_export_and_the_resume_writes_the_same_one(
        train_py_uninterrupted, tmp_path, tiny_model_dir, run_data_dir):
    out = tmp_path / "run"
    code, seconds = _signal_in_phase(_command(out, tiny_model_dir, run_data_dir, []), "writing the export", 1,
                                     tmp_path)
    assert code == EXIT_PREEMPTED and seconds < SECONDS_TO_EXIT, _last_line(tmp_path)
    assert _last_line(tmp_path).startswith(
        f"stopped: SIGTERM while writing the export: stopped, {out}/checkpoints/last.ckpt holds the last finished "
        "optimizer step (training had finished: the resumed run writes the export); continue with the same command "
        f"plus hydra.run.dir={out} ckpt_path=last")
    assert load_checkpoint(out / "checkpoints" / "last.ckpt")["global_step"] == 8
    assert not (out / "export").exists() and leftovers(out) == []  # the temporary copy removed on the way out
    assert_identical(train_py_uninterrupted, _resume(out, tiny_model_dir, run_data_dir, tmp_path))


FLOW = ["model=flow", "data=cached_embeddings", "model.max_length=32", "model.eval_batch_size=8", "data.batch_size=8",
        "callbacks.sts_evaluation.batch_size=8", "trainer.max_epochs=1", "+trainer.limit_train_batches=3",
        "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false", "export=false"]


@pytest.mark.slow  # 2 train.py processes, 10-20 s each on 2 shared cores
def test_sigterm_while_the_flow_features_are_cached_leaves_no_cache_and_the_next_run_builds_it(
        tmp_path, tiny_model_dir, run_data_dir):
    out, cache = tmp_path / "run", tmp_path / "cache"
    cmd = [*FAULT_DRIVER, *FLOW,
           f"model.model_name_or_path={tiny_model_dir}", f"paths.data_dir={run_data_dir}", f"data.cache_dir={cache}",
           f"hydra.run.dir={out}"]
    code, seconds = _signal_in_phase(cmd, "caching features", 1, tmp_path)
    assert code == EXIT_PREEMPTED and seconds < SECONDS_TO_EXIT, _last_line(tmp_path)
    assert _last_line(tmp_path) == (
        "stopped: SIGTERM while caching features: stopped before the first optimizer step, nothing to save; continue "
        f"with the same command plus hydra.run.dir={out} ckpt_path=last (exit code 75)")
    assert not list((cache / "features").glob("*")) if (cache / "features").exists() else True
    assert leftovers(cache) == []
    log = tmp_path / "again.log"
    assert start([*cmd, "ckpt_path=last"], log, env()).wait(timeout=600) == 0, log.read_text()[-3000:]
    assert len(list((cache / "features").glob("*.npy"))) == 1


# --- two ranks: every rank stops at the same batch ----------------------------------------------------------------
def _ranks(out: Path, model_dir: Path, data_dir: Path, extra: list[str], logs: Path, **extra_env: str) -> list:
    """Both ranks of a 2-rank gloo run through the fault driver, as this test's own children."""
    return ranks(out, model_dir, data_dir, extra, logs, FAULT_DRIVER, **extra_env)


def _tails(logs: Path) -> str:
    return "\n".join(f"--- {f}\n{f.read_text()[-2500:]}" for f in sorted(logs.glob("*.log")))


@pytest.mark.slow  # 2-rank gloo runs: 30-60 s each on 2 shared cores
@pytest.mark.parametrize(("phase", "n", "held", "step"), [("scoring STS", 2, 1, 4), ("writing the export", 1, 0, 8)],
                         ids=["validation-rank1", "export-rank0"])
def test_a_signal_to_one_rank_of_two_stops_both_with_75_and_the_run_resumes_bit_for_bit(
        phase, n, held, step, train_py_ddp_uninterrupted, tmp_path, tiny_model_dir, run_data_dir):
    out, markers, logs = tmp_path / "run", tmp_path / "markers", tmp_path / "logs"
    procs = _ranks(out, tiny_model_dir, run_data_dir, [], logs, FAULT_PAUSE=f"{phase}:{n}:{held}",
                   FAULT_PAUSE_DIR=str(markers))
    deadline = time.monotonic() + 600
    while not (markers / f"rank{held}.pid").is_file():
        assert all(p.poll() is None for p in procs) and time.monotonic() < deadline, _tails(logs)
        time.sleep(0.05)
    sent = time.monotonic()
    os.kill(int((markers / f"rank{held}.pid").read_text()), signal.SIGTERM)  # this rank only
    codes = [p.wait(timeout=600) for p in procs]
    print(f"\n2 ranks, {phase} #{n}, SIGTERM to rank {held}: exits {codes} after {time.monotonic() - sent:.2f} s")
    assert codes == [EXIT_PREEMPTED, EXIT_PREEMPTED], _tails(logs)
    assert load_checkpoint(out / "checkpoints" / "last.ckpt")["global_step"] == step
    for rank in (0, 1):
        assert (logs / f"rank{rank}.log").read_text().splitlines()[-1].startswith(
            f"stopped: rank {rank}: SIGTERM while {phase}" if phase == "scoring STS" else "stopped: SIGTERM while "
            "writing the export"), _tails(logs)
    resume = [p.wait(timeout=600) for p in _ranks(out, tiny_model_dir, run_data_dir, ["ckpt_path=last"],
                                                   tmp_path / "resume")]
    assert resume == [0, 0], _tails(tmp_path / "resume")
    assert_identical(train_py_ddp_uninterrupted, final_state(out), steps=train_py_ddp_uninterrupted["step"])
    assert leftovers(out) == []
