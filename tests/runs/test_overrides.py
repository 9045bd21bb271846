"""Every config mistake on the command line is one line, with the closest valid name, before Hydra composes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.runs.overrides import check_command_line
from tests.helpers import ENTRY_PROBE
from tests.paths import CONFIG_DIR, ROOT

MODELS = ", ".join(sorted(p.stem for p in (CONFIG_DIR / "model").glob("*.yaml")))  # the choices Hydra lists

# (entry point, command line, the exact line; "ok": nothing to say)
TABLE = [
    ("train", "model=simcs", f"unknown model 'simcs'; did you mean 'simcse'? (choices: {MODELS})"),
    ("train", "trainer=gpus", "unknown trainer 'gpus'; did you mean 'gpu'? (choices: cpu, ddp, default, gpu)"),
    ("train", "--multirun model=ct,simcs", f"unknown model 'simcs'; did you mean 'simcse'? (choices: {MODELS})"),
    ("train", "model=simcse model.temprature=0.1",
     "unknown key 'model.temprature' (model=simcse); did you mean 'model.temperature'?"),
    ("train", "model.temprature=0.1",
     "unknown key 'model.temprature' (model=sbert_nli); did you mean 'model.temperature'? "
     "(a key of model=diffcse, model=promptbert, model=rankcse, model=simcse)"),
    ("train", "model=simcse +model.temprature=0.1",
     "SimCSEModule (model=simcse) takes no argument 'temprature', so +model.temprature cannot be added; "
     "did you mean 'model.temperature'?"),
    ("train", "++model.lrr=2",
     "SBERTNLIModule (model=sbert_nli) takes no argument 'lrr', so ++model.lrr cannot be added; "
     "did you mean 'model.lr'?"),
    ("train", "+model.lr=1", "model.lr is already set: override it without the '+' (model.lr=...)"),
    ("train", "trainer.max_stepz=3", "unknown key 'trainer.max_stepz' (trainer=default); did you mean 'trainer.max_steps'?"),
    ("train", "seeed=1", "unknown key 'seeed'; did you mean 'seed'?"),
    ("train", "modle=ct", "unknown key 'modle'; did you mean 'model'?"),
    ("train", "model.lr.x=1", "model.lr is a value, not a group of keys: model.lr.x cannot be set"),
    ("train", "model=[a", "cannot parse the override 'model=[a': no viable alternative at input '[a'; quote a value "
     "with spaces, brackets or quotes as a whole, e.g. \"model='...'\" (inner quotes as \\')"),
    ("train", "data.sources=snli:dev,snli:test",
     "data.sources=snli:dev,snli:test holds several values: a list is data.sources=[snli:dev,snli:test], "
     "a sweep (one job per value) needs --multirun"),
    ("evaluate", "encoder.batch_sise=3", "unknown key 'encoder.batch_sise'; did you mean 'encoder.batch_size'?"),
    ("evaluate", "paths=defalt", "unknown paths 'defalt'; did you mean 'default'? (choices: default)"),
    ("evaluate", "scorer_options.sbert_wk.windw=3",
     "unknown key 'scorer_options.sbert_wk.windw'; did you mean 'scorer_options.sbert_wk.window'?"),
    ("train", "model=simcse model.temperature=0.1 ++model.lr=1 hydra.run.dir=x", "ok"),
    ("train", "--help", "ok"),
    ("evaluate", "encoders=[glove] +wandb.tags=[a]", "ok"),  # no _target_ there: nothing to check against
]


@pytest.mark.parametrize(("app", "line", "expected"), TABLE, ids=[f"{a}:{c}" for a, c, _ in TABLE])
def test_each_mistake_is_one_exact_line(app, line, expected):
    if expected == "ok":
        check_command_line(app, line.split())
        return
    with pytest.raises(ConfigError) as caught:
        check_command_line(app, line.split())
    assert str(caught.value) == expected


def test_an_unparsable_value_names_its_override_among_others():
    """Hydra's own message names only the grammar rule ("mismatched input '['"), not which of the overrides failed."""
    argv = ["model=promptbert", "trainer.max_steps=3", "model.template=This sentence : [X] means [MASK] .", "seed=1"]
    with pytest.raises(ConfigError) as caught:
        check_command_line("train", argv)
    assert str(caught.value).startswith("cannot parse the override 'model.template=This sentence : [X] means [MASK] .': "
                                        "mismatched input '['")
    check_command_line("train", [*argv[:2], "model.template='This sentence : \"[X]\" means [MASK] .'"])


def test_experiment_typo_lists_the_recipes_in_subfolders():
    with pytest.raises(ConfigError, match=r"unknown experiment 'flow/minilm_l7'; did you mean 'flow/minilm_l6'\? "
                                          r"\(choices: .*ct/minilm_l3, .*quickstart"):
        check_command_line("train", ["experiment=flow/minilm_l7"])



@pytest.mark.parametrize("how", ["--config-dir", "hydra.searchpath"])
def test_a_users_own_config_folder_is_checked_with_ours(tmp_path, how):
    """Their experiments are valid choices (and compose), their typos get the closest of theirs and ours."""
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text("# @package _global_\ntrainer:\n  max_steps: 2\n")
    folder = ["--config-dir", str(tmp_path)] if how == "--config-dir" else [f"hydra.searchpath=[file://{tmp_path}]"]
    check_command_line("train", [*folder, "experiment=mine", "trainer.max_steps=3"])
    check_command_line("train", [*folder, "experiment=quickstart"])
    with pytest.raises(ConfigError, match=r"unknown experiment 'mien'; did you mean 'mine'\?"):
        check_command_line("train", [*folder, "experiment=mien"])
    with pytest.raises(ConfigError, match="unknown experiment 'mine'"):
        check_command_line("train", ["experiment=mine"])  # without the folder: not ours
    (tmp_path / "experiment" / "quickstart.yaml").write_text("# @package _global_\n")
    with pytest.raises(ConfigError, match=r"quickstart.yaml has the name of a packaged config \(experiment/quickstart\), "
                                          r"which Hydra reads first, so yours would be ignored: name it differently"):
        check_command_line("train", [*folder, "experiment=mine"])


@pytest.mark.parametrize(("script", "argv", "line"), [
    ("train.py", ["model=simcs"], "error: unknown model 'simcs'; did you mean 'simcse'?"),
    ("train.py", ["model=simcse", "+model.temprature=0.1"], "error: SimCSEModule (model=simcse) takes no argument"),
    ("evaluate.py", ["encoder.batch_sise=3"], "error: unknown key 'encoder.batch_sise'"),
])
def test_entry_points_print_one_line_exit_2_without_torch(script, argv, line, tmp_path):
    done = subprocess.run([sys.executable, "-c", ENTRY_PROBE, script, *argv, f"hydra.run.dir={tmp_path}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(line)
    assert "torch imported: False" in done.stdout
