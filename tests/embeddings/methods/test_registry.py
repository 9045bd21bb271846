"""The methods' declarations (``embeddings.methods.registry``): found in their folders, unique, true to the code.

The declarations are plain values that ``--help`` reads without torch, so what they say about code (a scorer's
options, the pooling names) is checked here against the code itself.
"""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.declaration import MethodDeclaration, Paper, Tiny
from sts_lightning.embeddings.methods.registry import (
    aliases,
    method,
    method_of,
    methods,
    resolve,
    scorer_groups,
    trained_methods,
)
from tests.method_cases import planted_method
from tests.paths import ROOT

TOY = '''from sts_lightning.embeddings.methods.declaration import MethodDeclaration, ScorerGroup
METHOD = MethodDeclaration(name="toy", title="Toy", kind="training-free", summary="a toy",
                           scorers=(ScorerGroup({names}, "toy.scorer:ToyScorer", "Toy."),), evaluate="python evaluate.py")
'''


def test_every_method_folder_is_found_pooling_first_trained_ones_with_a_module():
    found = methods()
    assert found[0].name == "pooling" and len({m.name for m in found}) == len(found)
    assert {"pooling", "sbert_wk", "sen2pro", "meta"} <= {m.name for m in found if not m.trained}
    assert all(m.module and m.data and m.export for m in trained_methods())
    assert {m.name for m in found if m.name.startswith("simcse")} == {"simcse", "simcse_sup"}  # one folder, two


def test_a_planted_folder_is_a_method_and_a_clashing_name_is_refused(tmp_path):
    with planted_method(tmp_path / "a", "toy", TOY.format(names=("toy",))):
        assert method("toy") in methods() and method("toy").scorer_classes() == {"toy": "toy.scorer:ToyScorer"}
    assert "toy" not in {m.name for m in methods()}
    with planted_method(tmp_path / "b", "toy", TOY.format(names=("mean",))), \
            pytest.raises(ConfigError, match="scorer name declared twice: mean"):
        methods()


def test_aliases_and_unknown_names():
    assert aliases() == {"contrastive_tension": "ct", "token_vae": "latte_mix"}
    assert method("contrastive_tension").name == "ct"
    with pytest.raises(ConfigError, match="unknown method 'nope'"):
        method("nope")


@pytest.mark.parametrize("group", scorer_groups(), ids=lambda g: g.names[0])
def test_declared_scorer_options_are_the_class_signature(group):
    module, name = group.target.split(":")
    parameters = inspect.signature(getattr(importlib.import_module(module), name).__init__).parameters
    from sts_lightning.embeddings.methods.pooling import POOLINGS

    passed = {"self", "encoder"} | ({"pooling"} if set(group.names) <= set(POOLINGS) else set())
    options = tuple(p for p in parameters if p not in passed)
    required = tuple(p for p in options if parameters[p].default is inspect.Parameter.empty)
    assert (group.options, group.required) == (options, required)


def test_the_pooling_scorers_are_the_poolings():
    from sts_lightning.embeddings.methods.pooling import POOLINGS

    assert method("pooling").scorers[0].names == tuple(POOLINGS)


def test_the_declarations_import_no_torch():
    code = ("import sys; from sts_lightning.embeddings.methods.registry import methods; methods(); "
            "print(sorted(m for m in ('torch', 'transformers', 'numpy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert done.stdout.strip() == "[]"


def test_a_declaration_says_what_is_wrong_with_it():
    with pytest.raises(ValueError, match="kind 'fitted'"):
        MethodDeclaration(name="x", title="X", kind="fitted", summary="x")
    with pytest.raises(ValueError, match="needs module"):
        MethodDeclaration(name="x", title="X", kind="trained", summary="x", data="nli")
    with pytest.raises(ValueError, match="check 'x.check' is not 'module:function'"):
        MethodDeclaration(name="x", title="X", kind="training-free", summary="x", evaluate="e", checks=("x.check",))


@pytest.mark.parametrize("declared", trained_methods(), ids=lambda m: m.name)
def test_the_class_facts_are_the_declarations(declared):
    """What the config check reads from the declaration before torch is what the class acts on."""
    module, _, name = declared.module.partition(":")
    cls = getattr(importlib.import_module(module), name)
    assert method_of(declared.module) is method_of(f"{module}.{name}")
    assert declared.name in {m.name for m in trained_methods() if m.module == declared.module}
    facts = ("matryoshka_ok", "matryoshka_refused", "training_only_head")
    assert {f: getattr(cls, f, getattr(declared, f)) for f in facts} == {f: getattr(declared, f) for f in facts}
    if not hasattr(cls, "matryoshka_ok"):  # a module without the Matryoshka option: nothing to allow
        assert not declared.matryoshka_ok


def test_the_declared_checks_are_functions():
    named = [c for m in methods() for c in m.checks] + [g.check for g in scorer_groups() if g.check]
    assert named and all(callable(resolve(c)) for c in named)


def test_the_card_names_the_variant_paper_and_the_tiny_placeholders_fill_in():
    other = Paper("T", "A B, C D", "V", 2020, "u")
    declared = MethodDeclaration(name="x", title="X", kind="training-free", summary="x", evaluate="e",
                                 variants={"v": ("X (v)", other)})
    assert declared.card("v").name == "X (v)" and declared.card("v").paper is other and declared.card().name == "X"
    assert other.short() == "B and D 2020"
    tiny = Tiny(data=("data.teachers=[{model_dir}]", "data.cache_dir={cache_dir}"))
    assert tiny.overrides("/m", "/c") == ["data.teachers=[/m]", "data.cache_dir=/c"]
