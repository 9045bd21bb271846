"""A new method is its declaration folder, its module and its model file: the generic tests pick it up with no list
to extend, and its own argument rule, config check and backbone key fire with no shared file edited.

Plants ``embeddings/methods/planted/__init__.py`` (on the methods package's search path) and
``configs/model/planted.yaml`` (on a Hydra search path) in a temporary folder, then asks each generic test's
parametrization for its cases: the model-default, fast_dev_run, export round-trip, model-card and DDP tests all
return the planted method, with its declared tiny settings, and its model file passes the model-default check.
Nothing is trained (the real tests train every declared method), so this stays fast.
"""

from __future__ import annotations

import re
import sys

import pytest

from sts_lightning.embeddings.methods.registry import method, trained_methods
from tests.helpers import compose_train
from tests.method_cases import (
    check_model_file,
    ddp_cases,
    export_cases,
    fast_dev_run_options,
    model_names,
    planted_method,
    st_export_names,
    tiny_overrides,
)
from tests.paths import CONFIG_DIR, ROOT

DECLARATION = '''from sts_lightning.embeddings.methods.declaration import ST_EXPORT, MethodDeclaration, Tiny

METHOD = MethodDeclaration(
    name="planted", title="Planted", kind="trained", summary="a planted copy of SBERT-NLI",
    export=ST_EXPORT, data="nli", module="sts_lightning.lightning_modules.sbert_nli:SBERTNLIModule",
    tiny=Tiny(data=("data.sources=[snli:dev]",), options=(("model.pooling=cls",),), ddp={"": ()}),
)
'''


def test_a_planted_method_is_picked_up_by_every_generic_test(tmp_path):
    configs = tmp_path / "configs"
    (configs / "model").mkdir(parents=True)
    text = (CONFIG_DIR / "model" / "sbert_nli.yaml").read_text().replace("SBERT", "Planted", 1)
    (configs / "model" / "planted.yaml").write_text(text)
    with planted_method(tmp_path / "methods", "planted", DECLARATION):
        assert method("planted") in trained_methods()
        assert "planted" in model_names()  # test_model_defaults, test_model_cards, test_bf16_training, ...
        assert ["model=planted", "model.pooling=cls"] in fast_dev_run_options()  # test_fast_dev_run
        assert "planted" in st_export_names()  # test_model_cards: SentenceTransformer loads its export
        assert ddp_cases()["planted"] == ("planted", ())  # test_ddp_train
        assert tiny_overrides("planted", "nli", "/m", tmp_path) == ["data.sources=[snli:dev]"]
        check_model_file("planted", configs)  # test_model_defaults: data group and module as declared
        ids = {case.id for case in export_cases((f"hydra.searchpath=[file://{configs}]",))}
        assert {"planted", "planted-cls"} <= ids  # test_export_roundtrip, each pooling its config offers
    assert "planted" not in model_names()


RULED = '''from sts_lightning.embeddings.methods.declaration import ST_EXPORT, MethodDeclaration
from sts_lightning.embeddings.methods.rules import Rule

METHOD = MethodDeclaration(
    name="planted", title="Planted", kind="trained", summary="a planted method with rules of its own",
    export=ST_EXPORT, data="nli", module="sts_lightning.lightning_modules.planted:PlantedModule",
    rules={"knob": Rule(float, 0, 1)}, checks=("sts_lightning.embeddings.methods.planted.checks:check_teacher",),
    backbones=("model.teacher",),
)
'''
CHECK = '''from sts_lightning.embeddings.errors import ConfigError


def check_teacher(cfg):
    model = cfg.get("model") or {}
    if model.get("teacher") == model.get("model_name_or_path"):
        raise ConfigError(f"model.teacher={model.get('teacher')!r} is the student: name another model")
'''
MODULE = '''from sts_lightning.embeddings.methods.planted.checks import check_teacher
from sts_lightning.lightning_modules.arg_rules import check_args
from sts_lightning.lightning_modules.sbert_nli import SBERTNLIModule


class PlantedModule(SBERTNLIModule):
    def __init__(self, model_name_or_path="all-MiniLM-L6-v2", *, knob=0.5, teacher="paraphrase-MiniLM-L3-v2", **base):
        check_args({"knob": knob})
        check_teacher({"model": {"model_name_or_path": model_name_or_path, "teacher": teacher}})
        super().__init__(model_name_or_path, **base)
'''
YAML = '''# @package _global_
defaults:
  - /constructor@model: SBERTNLIModule
  - override /data: nli

model:
  _target_: sts_lightning.lightning_modules.planted.PlantedModule
  knob: 0.5
  teacher: paraphrase-MiniLM-L3-v2
'''
LIBRARY = ("embeddings", "sts", "datamodules", "lightning_modules", "callbacks", "runs", "sts_lightning", "configs")


def _naming_planted() -> set[str]:
    """The library files that name the planted method (none should, before or after)."""
    return {str(p) for folder in LIBRARY for p in (ROOT / folder).rglob("*")
            if p.suffix in (".py", ".yaml") and "planted" in p.read_text(encoding="utf-8", errors="replace").lower()}


def test_a_planted_methods_own_rule_check_and_backbone_key_fire_from_its_files_alone(tmp_path, monkeypatch):
    """Its declaration, check and module in its own folders, its model file in a config folder: ``check_config`` (the
    command's check before torch), the ``+key`` check and the constructor (a Python user) refuse with its lines."""
    import sts_lightning.lightning_modules as modules
    from sts_lightning.embeddings.errors import ConfigError
    from sts_lightning.runs.config_checks import backbone_specs, check_config
    from sts_lightning.runs.overrides import check_command_line

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = _naming_planted()
    configs, module_dir = tmp_path / "configs", tmp_path / "modules"
    (configs / "model").mkdir(parents=True)
    (configs / "model" / "planted.yaml").write_text(YAML)
    module_dir.mkdir()
    (module_dir / "planted.py").write_text(MODULE)
    monkeypatch.setattr(modules, "__path__", [*modules.__path__, str(module_dir)])
    with planted_method(tmp_path / "methods", "planted", RULED):
        (tmp_path / "methods" / "planted" / "checks.py").write_text(CHECK)
        check_model_file("planted", configs)
        cfg = compose_train(["model=planted"], str(configs))
        check_config(cfg)
        assert ("model.teacher", "paraphrase-MiniLM-L3-v2") in backbone_specs(cfg)
        cases = {"model.knob=2": "model.knob=2 is not allowed: it must be a number >= 0 and <= 1",
                 "model.teacher=all-MiniLM-L6-v2": "model.teacher='all-MiniLM-L6-v2' is the student: name another model",
                 "model.teacher=all-MiniLM-L6-v3": "unknown backbone model.teacher='all-MiniLM-L6-v3'; did you mean "
                                                   "'all-MiniLM-L6-v2'?"}
        for override, message in cases.items():
            with pytest.raises(ConfigError) as caught:
                check_config(compose_train(["model=planted", override], str(configs)))
            assert str(caught.value).startswith(message)
        with pytest.raises(ConfigError, match="PlantedModule .model=planted. takes no argument 'knbo'.*'model.knob'"):
            check_command_line("train", ["model=planted", "+model.knbo=1", f"hydra.searchpath=[file://{configs}]"])
        from sts_lightning.lightning_modules.planted import PlantedModule

        for options, message in [({"knob": 2}, cases["model.knob=2"]),
                                 ({"teacher": "all-MiniLM-L6-v2"}, cases["model.teacher=all-MiniLM-L6-v2"])]:
            with pytest.raises(ConfigError, match=re.escape(message)):
                PlantedModule(**options)
    sys.modules.pop("sts_lightning.lightning_modules.planted", None)
    assert _naming_planted() == before  # no shared file edited to name it: the method is its own files
