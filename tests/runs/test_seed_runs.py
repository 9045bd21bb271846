"""``seeds=[...]``: one run per seed on the tiny model, the table from each seed's own results, skip and resume."""

from __future__ import annotations

import json
import os
import signal
import statistics
from pathlib import Path

import pytest
import torch
from lightning.pytorch import Callback
from omegaconf import open_dict

from sts_lightning.embeddings.errors import ConfigError, Preempted
from sts_lightning.embeddings.io.checkpoint_file import load_checkpoint
from sts_lightning.runs import seed_runs, train_run
from sts_lightning.runs.run_results import read_train_run
from tests.helpers import compose_train_config

TINY = ["trainer.max_steps=3", "model.lr=0.01", "callbacks.sts_evaluation.tasks=[stsb-dev,sick-trial]",
        "callbacks.sts_evaluation.eval_at_start=false", "export=false"]


def _cfg(out, model_dir, data_dir, seeds="[0,1]", extra=()):
    return compose_train_config(out, model_dir, data_dir, [*TINY, f"seeds={seeds}", *extra])


def test_two_seeds_write_the_table_from_each_seeds_results_and_a_rerun_skips_them(
        tmp_path, tiny_model_dir, train_data_dir, monkeypatch, one_thread):
    from sts_lightning.runs.launch import launch

    cfg = _cfg(tmp_path, tiny_model_dir, train_data_dir)
    means = launch(cfg)
    summary = json.loads((tmp_path / "seeds_sts.json").read_text())
    assert summary["seeds"] == [0, 1] and summary["tasks"] == ["stsb-dev", "sick-trial"]
    # each seed's numbers are its own run's: read back from its directory as compare_runs reads any run
    after = {s: dict(read_train_run(tmp_path / f"seed{s}").rows)["after"] for s in (0, 1)}
    weights = [load_checkpoint(tmp_path / f"seed{s}" / "checkpoints" / "last.ckpt")["state_dict"] for s in (0, 1)]
    assert any(not torch.equal(weights[0][k], weights[1][k]) for k in weights[0])  # each seed its own run
    for task in summary["tasks"]:
        values = [after[0][task], after[1][task]]
        assert summary["per_seed"]["0"][task] == pytest.approx(values[0], abs=1e-4)
        assert summary["mean"][task] == pytest.approx(statistics.fmean(values), abs=1e-4)
        assert summary["std"][task] == pytest.approx(statistics.stdev(values), abs=1e-4)
    avgs = [statistics.fmean(after[s].values()) for s in (0, 1)]
    assert summary["std"]["avg"] == pytest.approx(statistics.stdev(avgs), abs=1e-4)
    assert means["val/stsb-dev_spearman"] == pytest.approx(summary["mean"]["stsb-dev"], abs=1e-4)
    table = (tmp_path / "seeds_sts.md").read_text()
    assert f"| mean ± std (2 seeds) | {summary['mean']['stsb-dev']:.2f} ± {summary['std']['stsb-dev']:.2f} |" in table
    assert "seed0" in read_train_run(tmp_path / "seed0").label  # the seed's own .hydra/config.yaml

    # The same command again (hydra.run.dir=<run dir>): nothing is trained, the same table comes back; a grown
    # seeds list trains only the new seed.
    trained = []
    monkeypatch.setattr(train_run, "train", lambda one: trained.append(one.seed) or pytest.fail("re-trained"))
    assert launch(_cfg(tmp_path, tiny_model_dir, train_data_dir)) == pytest.approx(means)
    assert json.loads((tmp_path / "seeds_sts.json").read_text()) == summary


def test_an_interrupted_seed_resumes_from_its_last_checkpoint(tmp_path, tiny_model_dir, train_data_dir, monkeypatch):
    seed_dir = tmp_path / "seed1"
    (seed_dir / "checkpoints").mkdir(parents=True)
    (seed_dir / "checkpoints" / "last.ckpt").write_bytes(b"stand-in")
    (tmp_path / "seed0").mkdir()
    (tmp_path / "seed0" / seed_runs.DONE).write_text(json.dumps({"val/stsb-dev_spearman": 10.0}))
    seen = []

    def fake_train(one):
        seen.append((one.seed, one.ckpt_path, one.output_dir))
        return {"val/stsb-dev_spearman": 20.0}

    monkeypatch.setattr(train_run, "train", fake_train)
    means = seed_runs.run_seeds(_cfg(tmp_path, tiny_model_dir, train_data_dir, "[0,1,2]"))
    assert seen == [(1, "last", str(seed_dir)), (2, None, str(tmp_path / "seed2"))]
    assert means["val/stsb-dev_spearman"] == pytest.approx(50 / 3)
    summary = json.loads((tmp_path / "seeds_sts.json").read_text())
    assert summary["std"]["stsb-dev"] == pytest.approx(statistics.stdev([10.0, 20.0, 20.0]))

    def preempted(one):
        raise Preempted("stopped after optimizer step 3")

    monkeypatch.setattr(train_run, "train", preempted)
    with pytest.raises(Preempted, match=f"seed 3: .*hydra.run.dir={tmp_path} "):
        seed_runs.run_seeds(_cfg(tmp_path, tiny_model_dir, train_data_dir, "[0,1,2,3]"))


def test_a_run_directory_of_another_config_is_refused(tmp_path, tiny_model_dir, train_data_dir, monkeypatch):
    monkeypatch.setattr(train_run, "train", lambda one: {"val/stsb-dev_spearman": 1.0})
    seed_runs.run_seeds(_cfg(tmp_path, tiny_model_dir, train_data_dir, "[0]"))
    with pytest.raises(ConfigError, match=r"holds seed runs of another config \(model.lr: "):
        seed_runs.run_seeds(_cfg(tmp_path, tiny_model_dir, train_data_dir, "[0]", ["model.lr=0.5"]))


@pytest.mark.parametrize(("seeds", "extra", "message"), [
    ("[0,0]", [], "a seed twice"),
    ("[a]", [], "integers >= 0"),
    ("[]", [], "integers >= 0"),
    ("[0,1]", ["ckpt_path=/x.ckpt"], "its own last.ckpt"),
    ("[0,1]", ["push_to_hub=a/b"], "one repo"),
    ("[0,1]", ["trainer.devices=2"], "one job per seed"),
    ("[0,1]", ["~callbacks.sts_evaluation"], "sts_evaluation must be on"),
])
def test_seeds_that_cannot_run_are_one_line_before_torch(seeds, extra, message, tmp_path, tiny_model_dir,
                                                        train_data_dir):
    from sts_lightning.runs.config_checks import check_config

    cfg = _cfg(tmp_path, tiny_model_dir, train_data_dir, seeds, extra)
    with pytest.raises(ConfigError, match=message):
        check_config(cfg)


def test_seed_config_is_an_ordinary_single_run(tmp_path, tiny_model_dir, train_data_dir):
    cfg = _cfg(tmp_path, tiny_model_dir, train_data_dir)
    one = seed_runs.seed_config(cfg, 7, tmp_path / "seed7")
    assert (one.seeds, one.seed, one.output_dir, one.ckpt_path) == (None, 7, str(tmp_path / "seed7"), None)
    assert one.trainer.default_root_dir == str(tmp_path / "seed7")
    assert one.callbacks.last_checkpoint.dirpath == str(tmp_path / "seed7" / "checkpoints")
    with open_dict(cfg):
        cfg.seeds = None
    assert cfg.seed == 42  # the driver's copy, not the caller's config


class SignalOnce(Callback):
    """Sends this process SIGTERM after optimizer step ``step``, once (``marker`` remembers it across invocations):
    the ``Preemption`` callback then stops the run at the next step with its last.ckpt, as a real preemption does."""

    def __init__(self, step: int, marker: str):
        self.step, self.marker = step, Path(marker)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step and not self.marker.exists():
            self.marker.write_text("sent")
            os.kill(os.getpid(), signal.SIGTERM)


def test_a_preempted_seed_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path, tiny_model_dir, train_data_dir,
                                                                        one_thread):
    every_step = ["callbacks.last_checkpoint.every_n_train_steps=1"]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    seed_runs.run_seeds(_cfg(whole, tiny_model_dir, train_data_dir, "[0,1]", every_step))
    signal_once = [*every_step, f"+callbacks.signal_once={{_target_:{__name__}.SignalOnce,step:1,"
                                f"marker:{tmp_path / 'sent'}}}"]
    with pytest.raises(Preempted, match=f"seed 1: .*hydra.run.dir={cut} "):
        seed_runs.run_seeds(_cfg(cut, tiny_model_dir, train_data_dir, "[1,0]", signal_once))
    assert load_checkpoint(cut / "seed1" / "checkpoints" / "last.ckpt")["global_step"] == 2
    assert not (cut / "seed1" / seed_runs.DONE).exists() and not (cut / "seed0").exists()
    seed_runs.run_seeds(_cfg(cut, tiny_model_dir, train_data_dir, "[1,0]", signal_once))  # the same command again
    for seed in (0, 1):
        got, want = (load_checkpoint(d / f"seed{seed}" / "checkpoints" / "last.ckpt") for d in (cut, whole))
        assert got["global_step"] == want["global_step"] == 3
        for key, tensor in want["state_dict"].items():
            assert torch.equal(got["state_dict"][key], tensor), (seed, key)
