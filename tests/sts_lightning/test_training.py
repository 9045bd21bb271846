"""``sl.train``: the run ``train.py`` makes for the same overrides, twice in one process, with a user's own configs."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

import sts_lightning as sl
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.training import command_line
from tests.paths import ROOT

pytestmark = pytest.mark.slow

# A user's own model in their project: the packaged simcse with another temperature, nothing copied.
MY_MODEL = """\
# @package _global_
defaults:
  - simcse
model:
  temperature: 0.1
"""


def _overrides(model_dir, run_dir):
    return [f"model.model_name_or_path={model_dir}", "trainer.max_steps=2", "data.batch_size=4",
            f"hydra.run.dir={run_dir}"]


def test_the_same_run_as_train_py_twice_in_one_process(tmp_path, tiny_model_dir, train_data_dir, monkeypatch):
    monkeypatch.setenv("STS_DATA_DIR", str(train_data_dir))
    monkeypatch.setenv("WANDB_MODE", "disabled")
    cli = tmp_path / "cli"
    subprocess.run([sys.executable, "train.py", "model=simcse", *_overrides(tiny_model_dir, cli)], cwd=ROOT,
                   check=True, capture_output=True)
    runs = [sl.train("simcse", _overrides(tiny_model_dir, tmp_path / f"api{i}")) for i in range(2)]
    config = (cli / ".hydra" / "config.yaml").read_text()
    for i, run in enumerate(runs):
        assert run.dir == tmp_path / f"api{i}" and run.export == run.dir / "export"
        assert (run.dir / ".hydra" / "config.yaml").read_text() == config.replace(str(cli), str(run.dir))
        assert yaml.safe_load((run.dir / ".hydra" / "overrides.yaml").read_text())[0] == "model=simcse"
        assert (run.dir / "train.log").is_file() and "| stsb-dev |" in run.table
    assert runs[0].metrics == runs[1].metrics and "val/stsb-dev_spearman" in runs[0].metrics
    assert (cli / "sts_before_after.md").read_text() == runs[0].table.replace(str(runs[0].dir), str(cli))
    sims = runs[1].load().similarity(["a man plays a guitar ."], ["a man plays music ."])
    assert sims.shape == (1,)


def test_a_model_of_the_users_own_config_folder(tmp_path, tiny_model_dir, train_data_dir, monkeypatch):
    monkeypatch.setenv("STS_DATA_DIR", str(train_data_dir))
    monkeypatch.setenv("WANDB_MODE", "disabled")
    (tmp_path / "conf" / "model").mkdir(parents=True)
    (tmp_path / "conf" / "model" / "my_simcse.yaml").write_text(MY_MODEL)
    run = sl.train("my_simcse", [*_overrides(tiny_model_dir, tmp_path / "run"), "export=false"],
                   config_dir=tmp_path / "conf")
    assert run.config.model.temperature == 0.1 and run.config.model._target_.endswith("SimCSEModule")
    assert run.config.data._target_.endswith("SentenceDataModule") and run.export is None
    with pytest.raises(ConfigError, match="no export"):
        run.load()


def test_a_mistake_is_the_commands_one_line(tmp_path):
    with pytest.raises(ConfigError, match="unknown model 'simcs'; did you mean 'simcse'"):
        sl.train("simcs")
    with pytest.raises(ConfigError, match="unknown model 'my_simcs'; did you mean 'my_simcse'"):
        (tmp_path / "model").mkdir()
        (tmp_path / "model" / "my_simcse.yaml").write_text(MY_MODEL)
        sl.train("my_simcs", config_dir=tmp_path)


def test_the_call_as_a_command_line(tmp_path):
    assert command_line("ct", "trainer.max_steps=3", None) == ["model=ct", "trainer.max_steps=3"]
    assert command_line(None, [], "flow/minilm_l6") == ["experiment=flow/minilm_l6"]
    with pytest.raises(ConfigError, match="is not a directory"):
        sl.train("simcse", config_dir=tmp_path / "nowhere")


def test_the_command_module_once_imported_still_calls_the_api(monkeypatch):
    import sts_lightning.train as command
    from sts_lightning import training

    seen = []
    monkeypatch.setattr(training, "train", lambda *a, **k: seen.append((a, k)) or "run")
    assert sl.train is command and sl.train("ct", ["x=1"]) == "run" and seen == [(("ct", ["x=1"]), {})]
