"""``check_config``: config errors in one line before torch is imported, from the entry points as a user runs them;
what one method adds comes from its declaration."""

from __future__ import annotations

import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.runs.config_checks import backbone_specs, check_config
from tests.helpers import ENTRY_PROBE
from tests.paths import ROOT

SED = "sts_lightning.lightning_modules.sed.SEDModule"


@pytest.mark.parametrize(("script", "override", "message"), [
    ("train.py", "model.lr=abc", "model.lr='abc' is not allowed"),
    ("train.py", "data.batch_size=0", "data.batch_size=0 is not allowed"),
    ("evaluate.py", "encoder.batch_size=0", "encoder.batch_size=0 is not allowed"),
    ("evaluate.py", "scorers=[]", "no scorers configured"),
    ("evaluate.py", "bootstrap.samples=-1", "bootstrap.samples=-1 is not allowed"),
    ("train.py", "seeds=[0,0]", "seeds lists a seed twice"),
    ("train.py", "data.mixture_weights=[1,0]", "data.mixture_weights applies to data.mixture=proportional only"),
    ("evaluate.py", "scorers=[{name:prompt,template:'it means [MASK] .'}]",
     "scorer prompt: template='it means [MASK] .': needs exactly one [X]"),
])
def test_config_error_is_one_line_before_torch_loads(script, override, message, tmp_path):
    done = subprocess.run([sys.executable, "-c", ENTRY_PROBE, script, override, f"hydra.run.dir={tmp_path}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("error: ")
    assert message in done.stderr
    assert "torch imported: False" in done.stdout


def test_mini_batch_size_is_checked_early_when_the_device_count_is_a_number():
    cfg = OmegaConf.create({"model": {"mini_batch_size": 24}, "data": {"batch_size": 64},
                            "trainer": {"devices": 2, "num_nodes": 1}})
    with pytest.raises(ConfigError, match="must divide the per-device batch 32"):
        check_config(cfg)
    cfg.trainer.devices = "auto"  # needs torch to count GPUs: left to train()
    check_config(cfg)


def test_evaluate_needs_tasks_encoders_and_scorers():
    with pytest.raises(ConfigError, match="no tasks configured"):
        check_config(OmegaConf.create({"tasks": [], "encoders": ["x"], "scorers": ["mean"]}))


def test_backbone_typos_are_refused_with_the_packaged_names(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    good = {"model": {"_target_": SED, "model_name_or_path": "paraphrase-MiniLM-L3-v2"},
            "data": {"teachers": ["all-MiniLM-L6-v2", {"model": "multilingual-e5-small"}], "align_to": None}}
    check_config(OmegaConf.create(good))
    bad = OmegaConf.create(good)
    bad.data.teachers[1] = {"model": "all-MiniLM-L6-v3"}
    with pytest.raises(ConfigError, match=r"unknown backbone data.teachers\[1\]='all-MiniLM-L6-v3'; did you mean "
                                          r"'all-MiniLM-L6-v2'\?.*closest first: all-MiniLM-L6-v2,"):
        check_config(bad)
    nli = OmegaConf.create({"model": {"_target_": "sts_lightning.lightning_modules.sbert_nli.SBERTNLIModule"},
                            "data": {"sources": ["snli:dev"]}})
    check_config(nli)  # an NLI data group's sources are data, not encoders: its method declares no such key
    assert [key for key, _ in backbone_specs(OmegaConf.create(good))] == [
        "model.model_name_or_path", "data.model_name_or_path", "data.align_to", "data.teachers[0]", "data.teachers[1]"]
    with pytest.raises(ConfigError, match=r"encoders\[1\]='glove-6b-100d'; did you mean 'glove-6b-50d'"):
        check_config(OmegaConf.create({"tasks": ["sts12"], "encoders": ["none", "glove-6b-100d"],
                                            "scorers": ["mean"]}))


@pytest.mark.parametrize(("override", "message"), [
    ({"scorers": ["meen"]}, "unknown scorer 'meen'; did you mean 'mean'? choose one of: cls, "),
    ({"scorers": [{"name": "sbertwk"}]}, "unknown scorer 'sbertwk'; did you mean 'sbert_wk'? choose one of: "),
    ({"tasks": ["sts12+stsb-dve"]}, "unknown STS task 'stsb-dve'; did you mean 'stsb-dev'? choose one of: "),
    ({"data_source": "hubb"}, "unknown data source 'hubb'; did you mean 'hub'? choose one of: hub, local"),
])
def test_scorer_task_and_source_names_are_checked_before_torch(override, message):
    cfg = OmegaConf.create({"tasks": ["standard", "STS12", "sick-train+sick-trial"], "encoders": ["glove"],
                            "scorers": ["mean", {"name": "sbert_wk"}], "data_source": "local"})
    check_config(cfg)
    check_config(OmegaConf.merge(cfg, {"tasks": "standard"}))  # tasks=standard: one name, not a list
    with pytest.raises(ConfigError) as caught:
        check_config(OmegaConf.merge(cfg, override))
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("template", "", "model.template='': the template is empty"),
    ("template", "the [X] is good .", "model.template='the [X] is good .': needs exactly one [MASK]"),
    ("template2", "it means [MASK] .", "model.template2='it means [MASK] .': needs exactly one [X]"),
    ("template", None, "model.template=None: a template is a string"),
])
def test_promptbert_templates_are_checked_before_torch(key, value, message):
    cfg = OmegaConf.create({"model": {"_target_": "sts_lightning.lightning_modules.promptbert.PromptBERTModule",
                                      "template": 'This sentence : "[X]" means[MASK].', "template2": None}})
    check_config(cfg)  # template2=null: the first template for every view
    cfg.model[key] = value
    with pytest.raises(ConfigError) as caught:
        check_config(cfg)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_a_config_that_passed_is_not_checked_again(monkeypatch):
    from sts_lightning.runs import config_checks

    cfg = OmegaConf.create({"model": {"lr": 0.1}, "data": {"batch_size": 8}})
    check_config(cfg)
    monkeypatch.setattr(config_checks, "_check_train", lambda cfg: pytest.fail("checked twice"))
    check_config(cfg)  # train.py checked it before torch; train() does not again
    with pytest.raises(pytest.fail.Exception):
        check_config(OmegaConf.merge(cfg, {"seed": 1}))  # another config is checked
