"""Bad values of the options issue 41 added: one line naming the key, before any model loads (issue 41).

Each case composes the real config (``configs/train.yaml`` / ``evaluate.yaml`` with the tiny fixtures), runs what
``python train.py`` / ``python evaluate.py`` run before torch (``runs.config_checks.check_config``) and then the
run itself with every way to load a model patched to fail: the error must be the early one, one line, naming the key.
Two cases run the entry points in a subprocess, to show torch is not even imported.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sts_lightning.embeddings.errors import ConfigError
from tests.helpers import ENTRY_PROBE, compose_evaluate_config, compose_train_config
from tests.paths import ROOT

NO_MLM_HEAD = "{tmp}/encoder-only"  # a directory whose config.json lists only BertModel


@pytest.fixture()
def no_model_loads(monkeypatch):
    """Every loader of a model fails the test: the encoder (and through it teachers), the generator, a static model."""
    from sts_lightning.embeddings.encoders import hf, static
    from sts_lightning.embeddings.methods.diffcse import nets

    def loaded(*args, **kwargs):
        raise AssertionError("a model was loaded before the error")

    monkeypatch.setattr(hf.HFEncoder, "from_pretrained", classmethod(loaded))
    monkeypatch.setattr(static.StaticWordEncoder, "from_package", classmethod(loaded))
    monkeypatch.setattr(nets, "load_generator", loaded)


def _one_line(caught, key: str) -> None:
    text = str(caught.value)
    assert "\n" not in text and key in text, text


TRAIN_CASES = [  # (overrides, the key the line names, what it says)
    (["model=promptbert", "model.template=''"], "model.template", "model.template='': the template is empty"),
    (["model=promptbert", "model.template='the [X] is'"], "model.template", "needs exactly one [MASK]"),
    (["model=promptbert", "model.template='it means [MASK] .'"], "model.template", "needs exactly one [X]"),
    (["model=promptbert", "model.template2='{{sentence}} means [MASK]'"], "model.template2", "needs exactly one [X]"),
    *[([f"model={m}", "model.matryoshka_dims=[100000]", *more], "model.matryoshka_dims",
       "100000 is larger than the model's embedding dimension 32")
      for m, more in (("simcse", ["model.mlp=none"]), ("cosent", []), ("promptbert", ["model.head=none"]))],
    *[([f"model={m}", "model.matryoshka_dims=[16]", *more], "model.matryoshka_dims",
       f"with {head}: that head is used in training only and the export drops it")
      for m, head, more in (("simcse", "model.mlp=train", []), ("diffcse", "model.mlp=train", ["model.generator={model}-mlm"]),
                            ("rankcse", "model.mlp=train", []), ("promptbert", "model.head=mlp", []))],
    (["model=sed", "model.matryoshka_dims=[64]"], "model.matryoshka_dims",
     "is not allowed: SEDModule regresses the vector onto the teachers' mean by MSE; the MSE of a prefix is a subset"),
    (["model=simcse", "model.matryoshka_dims=[16,16]"], "model.matryoshka_dims", "must be strictly decreasing"),
    (["model=rankcse", "data.teachers=[/nonexistent/teacher,{model}]"], "data.teachers[0]", "'/nonexistent/teacher'"),
    (["model=rankcse", "data.teachers=['not a model!',{model}]"], "data.teachers[0]", "'not a model!'"),
    (["model=diffcse", f"model.generator={NO_MLM_HEAD}"], "model.generator",
     "has no MLM head (config.json: architectures ['BertModel'])"),
]


@pytest.fixture()
def encoder_only(tmp_path, tiny_model_dir):
    folder = tmp_path / "encoder-only"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**json.loads((tiny_model_dir / "config.json").read_text()),
                                                    "architectures": ["BertModel"]}))
    return folder


@pytest.mark.parametrize("hub", ["offline", "online"])
@pytest.mark.parametrize(("overrides", "key", "message"), TRAIN_CASES, ids=[" ".join(c[0]) for c in TRAIN_CASES])
def test_train_refuses_before_any_model_loads(overrides, key, message, hub, tmp_path, tiny_model_dir, train_data_dir,
                                             encoder_only, no_model_loads, monkeypatch):
    """The hub switched on too: a path that does not exist, or a name no hub id can be, is not a hub question."""
    from sts_lightning.runs.config_checks import check_config
    from sts_lightning.train import run

    if hub == "online":
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    overrides = [o.format(tmp=tmp_path, model=tiny_model_dir) for o in overrides]
    cfg = compose_train_config(tmp_path / "out", tiny_model_dir, train_data_dir, overrides)
    for check in (check_config, run):  # the early check alone, then python train.py's whole path
        with pytest.raises(ConfigError) as caught:
            check(cfg)
        _one_line(caught, key)
        assert message in str(caught.value)


@pytest.mark.parametrize(("overrides", "message"), [
    (["dims=[0]"], "dims=[0] must be a list of integers > 0"),
    (["dims=[100000]"], "dims=[100000]: 100000 larger than every encoder's vectors ({model}: 32); give dimensions up to 32"),
    (["dims=[64,100000]"], "dims=[64, 100000]: 64, 100000 larger than every encoder's vectors ({model}: 32)"),
    (["dims=[16,64]"], "dims=[16, 64]: 64 larger than every encoder's vectors ({model}: 32)"),
    (["'scorers=[{name:prompt,template:\"\"}]'"], "scorer prompt: template='': the template is empty"),
    (["'scorers=[{name:prompt,template:\"it is [MASK]\"}]'"], "scorer prompt: template='it is [MASK]': needs exactly one [X]"),
])
def test_evaluate_refuses_before_any_model_loads(overrides, message, tmp_path, tiny_model_dir, tiny_data_dir,
                                                no_model_loads):
    from sts_lightning.runs.config_checks import check_config
    from sts_lightning.runs.evaluate_run import evaluate

    cfg = compose_evaluate_config(tmp_path, [f"encoders=[{tiny_model_dir}]", "tasks=[stsb-dev]",
                                             f"paths.data_dir={tiny_data_dir}", *[o.strip("'") for o in overrides]])
    for check in (check_config, evaluate):
        with pytest.raises(ConfigError) as caught:
            check(cfg)
        _one_line(caught, message.split("=")[0])
        assert message.format(model=tiny_model_dir) in str(caught.value)


def test_dims_that_fit_one_encoder_are_left_to_the_rows(tiny_model_dir):
    """A dimension wider than one encoder but not another: the narrower one's row is n/a
    (tests/embeddings/scoring/test_truncated.py); an encoder of unknown width: no early verdict."""
    from omegaconf import OmegaConf

    from sts_lightning.runs.config_checks import check_eval_dims

    cfg = OmegaConf.create({"encoders": [str(tiny_model_dir), "all-MiniLM-L6-v2"], "scorers": ["mean"], "dims": [64]})
    check_eval_dims(cfg)
    cfg.encoders, cfg.dims = [str(tiny_model_dir)], [16, 32]
    check_eval_dims(cfg)
    cfg.encoders = [str(tiny_model_dir), "some-owner/not-downloaded"]
    cfg.dims = [100000]
    check_eval_dims(cfg)


@pytest.mark.parametrize(("script", "override", "message"), [
    ("train.py", "model.matryoshka_dims=[64]", "model.matryoshka_dims is not allowed: SEDModule regresses"),
    ("evaluate.py", "dims=[0]", "dims=[0] must be a list of integers > 0"),
])
def test_the_entry_points_refuse_before_torch_is_imported(script, override, message, tmp_path):
    extra = ["model=sed"] if script == "train.py" else []
    done = subprocess.run([sys.executable, "-c", ENTRY_PROBE, script, *extra, override, f"hydra.run.dir={tmp_path}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr
    assert "torch imported: False" in done.stdout
