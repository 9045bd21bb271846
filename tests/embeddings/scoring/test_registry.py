"""Scorers come from the methods' declarations (``embeddings.methods.registry``; discovery is tested there)."""

from __future__ import annotations

import pytest

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.registry import methods, scorer_classes
from sts_lightning.embeddings.scoring import registry


def test_the_scorers_are_the_declared_ones_pooling_first():
    assert registry.SCORER_CLASSES == scorer_classes()
    assert list(registry.SCORER_CLASSES)[:6] == ["cls", "mean", "max", "first_last_avg", "last2_avg", "last3_avg"]
    declared = {name for m in methods() for g in m.scorers if g.encoder_free for name in g.names}
    assert registry.ENCODER_FREE == declared and {"source", "meta"} <= declared


def _required() -> list[tuple[str, str]]:
    """(scorer name, its first required option) for every registry scorer that has one."""
    import importlib

    found = []
    for name, target in registry.SCORER_CLASSES.items():
        module, cls = target.split(":")
        required = registry.required_options(getattr(importlib.import_module(module), cls))
        if required:
            found.append((name, required[0]))
    return found


def test_the_export_scorers_are_the_ones_with_a_required_option():
    assert {name for name, _ in _required()} >= {"flow", "whitening", "latte_mix", "simcse_mlp"}
    assert all(option == "path" for _, option in _required())


@pytest.mark.parametrize(("name", "option"), _required())
def test_a_missing_required_option_is_one_line_naming_scorer_and_option(name, option, tiny_encoder):
    """``build_scorer("flow", enc)`` used to be a bare TypeError traceback from the constructor."""
    for spec in (name, {"name": name}, {"name": name, "batch_size": 4}):
        with pytest.raises(ConfigError) as err:
            registry.build_scorer(spec, tiny_encoder)
        message = str(err.value)
        assert "\n" not in message and f"scorer {name!r} needs option {option}" in message
        assert f"scorers=[{{name:{name},{option}:<{option}>}}]" in message  # how to give it on the command line


def test_meta_without_path_is_one_line_too():
    with pytest.raises(ConfigError, match=r"scorer 'meta' needs option path .*scorers=\[\{name:meta,path:"):
        registry.build_scorer("meta", None)
