"""The first-step benchmark lists every model config and reports a failed run as "no", never as fast."""

from __future__ import annotations

from benchmarks.time_to_first_step import all_models, main
from tests.paths import CONFIG_DIR


def test_every_model_config_is_timed_by_default():
    assert sorted(all_models()) == sorted(p.stem for p in (CONFIG_DIR / "model").glob("*.yaml"))


def test_a_failing_run_is_not_counted_under_the_limit(tmp_path):
    rows = main(["--models", "no_such_model", "--timeout", "120", "--out", str(tmp_path)])
    (model, seconds, code), = rows
    assert model == "no_such_model" and code != 0 and seconds > 0
    assert "| no_such_model |" in (tmp_path / "first_step.md").read_text()
    assert "| no |" in (tmp_path / "first_step.md").read_text()
