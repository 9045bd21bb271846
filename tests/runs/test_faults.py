"""Fault injection (issue 18): unsafe or damaged checkpoints, and what a run does with them.

Each test names the issue item it covers and fails on the code before its fix.
"""

from __future__ import annotations

import os

import pytest
import torch

from embeddings.errors import DataError
from embeddings.io.checkpoint_file import load_checkpoint
from tests.runs.test_train import _cfg

MARKER_NAME = "payload_ran"


class _Payload:
    """Unpickling this runs code: what a crafted checkpoint would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _crafted_checkpoint(path, marker):
    torch.save({"state_dict": {}, "hyper_parameters": {}, "payload": _Payload(marker)}, path)
    return path


def test_item1_crafted_checkpoint_never_runs_code_even_when_torch_is_told_to_unpickle(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = tmp_path / MARKER_NAME
    ckpt = _crafted_checkpoint(tmp_path / "evil.ckpt", marker)
    with pytest.raises(DataError, match=r"evil\.ckpt: refusing to load") as err:
        load_checkpoint(ckpt)
    assert not marker.exists()
    assert "weights_only=False" not in str(err.value)  # torch's advice is not passed on for an untrusted file


@pytest.mark.parametrize("how", ["ckpt_path", "planted_last"])
def test_item1_resume_from_a_crafted_checkpoint_exits_with_one_line(how, tmp_path, monkeypatch, tiny_model_dir,
                                                                     train_data_dir, one_thread):
    from runs.train_run import train

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = tmp_path / MARKER_NAME
    out = tmp_path / "run"
    if how == "planted_last":
        (out / "checkpoints").mkdir(parents=True)
        ckpt, arg = _crafted_checkpoint(out / "checkpoints" / "last.ckpt", marker), "last"
    else:
        ckpt = _crafted_checkpoint(tmp_path / "evil.ckpt", marker)
        arg = str(ckpt)
    cfg = _cfg(out, tiny_model_dir, train_data_dir, ["trainer.max_steps=2", f"ckpt_path={arg}", "export=false"])
    with pytest.raises(DataError, match="refusing to load"):
        train(cfg)
    assert not marker.exists()


def test_item8_truncated_or_misplaced_checkpoint_names_the_file(tmp_path):
    good = tmp_path / "good.ckpt"
    torch.save({"state_dict": {"w": torch.ones(3)}}, good)
    assert load_checkpoint(good)["state_dict"]["w"].sum() == 3
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(good.read_bytes()[: os.path.getsize(good) // 2])
    with pytest.raises(DataError, match=r"cut\.ckpt: not a readable checkpoint \(truncated or corrupted\?\)"):
        load_checkpoint(cut)
    (tmp_path / "dir.ckpt").mkdir()
    with pytest.raises(DataError, match=r"dir\.ckpt: a directory, not a checkpoint file"):
        load_checkpoint(tmp_path / "dir.ckpt")
    with pytest.raises(DataError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "absent.ckpt")


def test_item8_evaluate_on_a_truncated_checkpoint_names_the_file(tmp_path):
    from embeddings.encoders.load import load_encoder

    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(DataError, match=r"cut\.ckpt: not a readable checkpoint"):
        load_encoder(str(cut))


def test_item2_runs_started_in_the_same_second_get_their_own_directory():
    import subprocess
    import sys

    from tests.paths import ROOT

    code = ("from omegaconf import OmegaConf; from runs.run_id import register_run_id; register_run_id(); "
            "c = OmegaConf.create({'d': 'out/${run_id:}', 'e': '${d}'}); print(c.d, c.e)")
    dirs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
        first, again = done.stdout.split()
        assert first == again  # one suffix per process, however often the run dir is resolved
        dirs.append(first)
    assert dirs[0] != dirs[1]
    hydra_cfg = (ROOT / "configs" / "hydra" / "default.yaml").read_text()
    assert "${now:%Y-%m-%d_%H-%M-%S}_${run_id:}" in hydra_cfg


def test_item2_a_fresh_run_refuses_a_directory_holding_another_runs_checkpoint(tmp_path, tiny_model_dir,
                                                                                 train_data_dir, one_thread):
    from embeddings.errors import ConfigError
    from runs.train_run import train

    out = tmp_path / "run"
    train(_cfg(out, tiny_model_dir, train_data_dir, ["trainer.max_steps=2", "export=false"]))
    assert (out / "checkpoints" / "last.ckpt").is_file()
    before = (out / "checkpoints" / "last.ckpt").read_bytes()
    with pytest.raises(ConfigError, match=r"already holds a run \(.*last\.ckpt.*\): resume it with ckpt_path=last"):
        train(_cfg(out, tiny_model_dir, train_data_dir, ["trainer.max_steps=2", "export=false", "seed=2"]))
    assert (out / "checkpoints" / "last.ckpt").read_bytes() == before  # nothing of the first run overwritten
