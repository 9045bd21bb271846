"""A ``_target_``'s keyword arguments read from source (``runs.constructor_defaults.target_args``): its own, every
base's through ``**kwargs``, a dataclass's fields, never an import."""

from __future__ import annotations

import sys

from sts_lightning.runs.constructor_defaults import module_file, target_args


def test_a_subclass_takes_its_own_and_its_bases_arguments():
    args = target_args("sts_lightning.lightning_modules.simcse.SimCSEModule")
    assert {"temperature", "mlp", "lr", "optimizer", "gradient_checkpointing"} <= args  # own + EncoderModule's
    assert "temprature" not in args


def test_third_party_targets_are_read_without_importing_them():
    loaded = set(sys.modules)
    args = target_args("lightning.pytorch.Trainer")
    assert {"max_steps", "devices", "precision"} <= args
    assert not {"lightning", "torch"} & (set(sys.modules) - loaded)


def test_unknown_when_it_cannot_be_followed(tmp_path, monkeypatch):
    (tmp_path / "planted.py").write_text(
        "import abc\n"
        "from dataclasses import dataclass\n"
        "class Open(abc.ABC):\n    def __init__(self, a, **kw): ...\n"          # base not followed: unknown
        "class Star:\n    def __init__(self, *args): ...\n"                     # *args: unknown
        "@dataclass\nclass Data:\n    x: int = 0\n"                             # dataclass: its fields
        "@dataclass\nclass MoreData(Data):\n    y: str = ''\n"
        "class Mixin:\n    pass\n"
        "class Both(Closed, Mixin):\n    def __init__(self, d=0, **base): ...\n"  # every base followed
        "class Closed:\n    def __init__(self, a, *, b=1): ...\n"
        "class Child(Closed):\n    def __init__(self, c, **base): ...\n"
        "class Plain(Closed):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert module_file("planted") == tmp_path / "planted.py"
    assert [target_args(f"planted.{n}") for n in ("Open", "Star")] == [None, None]
    assert target_args("planted.Data") == {"x"} and target_args("planted.MoreData") == {"x", "y"}
    assert target_args("planted.Both") == {"a", "b", "d"}
    assert target_args("planted.Closed") == {"a", "b"}
    assert target_args("planted.Child") == {"a", "b", "c"}
    assert target_args("planted.Plain") == {"a", "b"}
    assert target_args("planted.Missing") is None
    assert target_args("no_such_package.X") is None
