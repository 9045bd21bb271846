"""One table of argument ranges (shared names here, a method's own in its declaration): a constructor and the config
check refuse a value with the same line."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods import registry
from sts_lightning.lightning_modules.arg_rules import MODEL_RULES, Rule, check_value, model_rules
from sts_lightning.runs.config_checks import check_config
from tests.method_cases import constructor_defaults, model_names, target_class


def _message(call) -> str:
    with pytest.raises(ConfigError) as err:
        call()
    return str(err.value)


@pytest.mark.parametrize(("target", "name", "value"), [
    ("sbert_nli.SBERTNLIModule", "lr", 0.0), ("sbert_nli.SBERTNLIModule", "warmup_ratio", 1.0),
    ("cosent.CoSENTModule", "scale", -1), ("simcse.SimCSEModule", "temperature", 0),
    ("ct.ContrastiveTensionModule", "embedding_lr", 0.0), ("latte_mix.LatteMixModule", "tau", 0.0),
    ("flow.BertFlowModule", "eval_batch_size", 0), ("sed.SEDModule", "max_length", 0),
])
def test_constructor_and_config_check_give_the_same_line(target, name, value):
    import importlib

    module, cls = target.split(".")
    cls = getattr(importlib.import_module(f"sts_lightning.lightning_modules.{module}"), cls)
    built = _message(lambda: cls("/nonexistent/model", **{name: value}))  # refused before the model loads
    checked = _message(lambda: check_config(OmegaConf.create({"model": {name: value}})))
    assert built == checked == f"model.{name}={value!r} is not allowed: it must be {model_rules()[name].describe()}"


def test_every_rule_names_an_argument_of_its_methods():
    arguments = set().union(*(constructor_defaults(target_class(model)) for model in model_names()))
    assert set(MODEL_RULES) <= arguments, sorted(set(MODEL_RULES) - arguments)
    for model in model_names():
        own = set(registry.method(model).rules) | set(registry.method(model).choices)
        assert own <= set(constructor_defaults(target_class(model))), (model, sorted(own))


def test_a_method_cannot_give_a_shared_name_another_meaning(monkeypatch):
    sbert = registry.method("sbert_nli")
    monkeypatch.setattr(registry, "methods", lambda: (sbert.__class__(**{**vars(sbert), "rules": {"lr": Rule(int, 5)}}),))
    with pytest.raises(ConfigError, match="method 'sbert_nli' gives model.lr another meaning than lightning_modules"):
        model_rules()


@pytest.mark.parametrize(("value", "ok"), [(1, True), (0.5, True), (0, False), (True, False), ("1", False),
                                           (float("nan"), False), (None, False), (-1, True)])
def test_rule_refuses_bools_strings_and_non_finite_numbers(value, ok):
    rule = Rule(float, 0, low_open=True, also=(-1,))
    assert rule.allows(value) is ok
    if not ok:
        with pytest.raises(ConfigError, match=r"^model\.x=.* is not allowed: it must be a number > 0 or -1$"):
            check_value("model.x", value, rule)
