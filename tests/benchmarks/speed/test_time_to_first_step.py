"""The first-step benchmark lists every model config and reports a failed run as "no", never as fast."""

from __future__ import annotations

from benchmarks.speed.time_to_first_step import all_models, first_step_times, main
from tests.paths import CONFIG_DIR


def test_every_model_config_is_timed_by_default():
    assert sorted(all_models()) == sorted(p.stem for p in (CONFIG_DIR / "model").glob("*.yaml"))


def test_a_failing_run_is_not_counted_under_the_limit(tmp_path):
    rows = main(["--models", "no_such_model", "--timeout", "120", "--out", str(tmp_path)])
    (model, seconds, code), = rows
    assert model == "no_such_model" and code != 0 and seconds > 0
    assert "| no_such_model |" in (tmp_path / "first_step.md").read_text()
    assert "| no |" in (tmp_path / "first_step.md").read_text()


def test_the_estimate_and_the_step_1_time_are_read_from_the_run_log():
    log = ("[x][sts_lightning.runs.first_step][INFO] - before step 1: caching features: 20,000 sentences through 1 "
           "encoder (~1m40s): ~1m40s in all (estimated)\n"
           "[x][sts_lightning.callbacks.progress_log][INFO] - step 1 starts 2m05s after launch (1m52s after the "
           "estimate of ~1m40s)\n")
    assert first_step_times(log) == ("1m40s", "2m05s")
    assert first_step_times("error: unknown model 'x'") == ("-", "-")
