"""Each default written once (issue 40, part 4): the constructors' signatures are the configs' defaults.

What fails here: the source reading disagreeing with Python's own ``inspect`` on the imported classes; a config file
writing a value its constructor already has as default (a second copy, the start of a drift) or a key the
constructor does not take; an ``Options:`` note naming a key that no longer exists; a default the configs cannot
read; a composition in a fresh process (Hydra's plugin discovery) missing the nodes.
"""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
import textwrap

import pytest
import yaml
from omegaconf import OmegaConf

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.runs import constructor_defaults as cd
from tests.helpers import compose_evaluate_config, compose_train
from tests.method_cases import constructor_defaults
from tests.paths import CONFIG_DIR, ROOT

NODES = cd.nodes()
CLASS_NODES = {name: node for name, node in NODES.items() if "_target_" in node}
NOTE = re.compile(r"^#   (\w+): ")


def _imported(target: str):
    module, _, name = target.replace(":", ".").rpartition(".")
    return getattr(importlib.import_module(module), name)


def _inspected(obj) -> dict:
    """What Python itself says the constructor takes (``**base`` reaching the bases' arguments), in the nodes' terms:
    no ``encoder``, ``MISSING`` for no default, tuples as lists."""
    found = ({p.name: p.default for p in inspect.signature(obj).parameters.values()
              if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)} if inspect.isfunction(obj)
             else constructor_defaults(obj))
    return {name: cd.MISSING if default is inspect.Parameter.empty else list(default) if isinstance(default, tuple)
            else default for name, default in found.items() if name not in cd.SKIPPED}


@pytest.mark.parametrize("name", sorted(CLASS_NODES))
def test_the_source_reading_equals_inspect(name):
    node = dict(CLASS_NODES[name])
    target = node.pop("_target_")
    assert node == _inspected(_imported(target))


def test_scorer_and_encoder_options_equal_inspect():
    from sts_lightning.embeddings.methods.registry import scorer_groups

    for group in scorer_groups():
        actual = _inspected(_imported(group.target))
        for scorer in group.names:
            for key, value in NODES["scorer_options"].get(scorer, {}).items():
                assert actual[key] == value, (scorer, key)
    encoder = _inspected(_imported(cd.LOAD_ENCODER))
    encoder.pop("name")
    assert NODES["encoder_options"] == encoder


def _config_nodes():
    """``(file, node as written, its constructor's defaults)`` for every file that departs from a constructor."""
    for path in sorted((CONFIG_DIR / "data").glob("*.yaml")):
        yield path.name, yaml.safe_load(path.read_text()), path
    for path in sorted((CONFIG_DIR / "model").glob("*.yaml")):
        yield path.name, (yaml.safe_load(path.read_text()) or {}).get("model") or {}, path
    evaluate = yaml.safe_load((CONFIG_DIR / "evaluate.yaml").read_text())
    yield "evaluate.yaml encoder", evaluate.get("encoder") or {}, None
    for scorer, options in (evaluate.get("scorer_options") or {}).items():
        yield f"evaluate.yaml scorer_options.{scorer}", options, None


def _defaults_of(label: str, path) -> dict:
    if label.startswith("evaluate.yaml scorer_options."):
        return NODES["scorer_options"][label.rsplit(".", 1)[1]]
    if label == "evaluate.yaml encoder":
        return NODES["encoder_options"]
    entry = next(e for e in yaml.safe_load(path.read_text())["defaults"]
                 if isinstance(e, dict) and any(str(k).startswith("/constructor@") for k in e)
                 or isinstance(e, str) and e.startswith("/constructor"))
    return NODES[next(iter(entry.values()))] if isinstance(entry, dict) else {}


@pytest.mark.parametrize("label,node,path", list(_config_nodes()), ids=lambda v: v if isinstance(v, str) else "")
def test_a_config_writes_only_departures_from_its_constructor(label, node, path):
    if path is not None and path.stem == "simcse_sup":
        defaults = NODES["SimCSEModule"]  # a second recipe of SimCSE: departs from the same constructor
    else:
        defaults = _defaults_of(label, path)
    written = {k: v for k, v in node.items() if k != "defaults" and not (isinstance(v, str) and "${" in v)}
    unknown = sorted(set(written) - set(defaults))
    assert not unknown, f"{label} sets {unknown}, which the constructor does not take"
    repeated = sorted(k for k, v in written.items() if v == defaults[k])
    assert not repeated, f"{label} repeats the constructor's default of {repeated}: delete the line"


def test_data_groups_hold_only_wiring():
    """A Python user's ``XDataModule()`` gets the CLI's defaults: the group files set nothing but interpolations
    (the data directory, the seed, the model's backbone)."""
    for path in sorted((CONFIG_DIR / "data").glob("*.yaml")):
        node = yaml.safe_load(path.read_text())
        values = {k: v for k, v in node.items() if k != "defaults" and not (isinstance(v, str) and "${" in v)}
        assert not values, f"{path.name} sets {values}: a default belongs in the constructor"


@pytest.mark.parametrize("path", sorted([*(CONFIG_DIR / "data").glob("*.yaml"), *(CONFIG_DIR / "model").glob("*.yaml")]),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_option_notes_name_real_keys(path):
    """The ``# Options:`` comments explain keys whose values live in the constructor: a renamed key fails here."""
    group = "data" if path.parent.name == "data" else "model"
    cfg = compose_train([f"{group}={path.stem}"])
    keys = set(cfg[group])
    text = path.read_text()
    notes = text[text.index("# Options:"):] if "# Options:" in text else ""
    noted = [m[1] for line in notes.splitlines() if (m := NOTE.match(line))]
    assert set(noted) <= keys, f"{path.name} notes {sorted(set(noted) - keys)}, which {group} does not have"


def test_every_composed_key_stays_overridable_and_a_misspelt_one_is_refused():
    cfg = compose_train(["model=simcse", "model.temperature=0.1", "data.stream_buffer=5"])
    assert cfg.model.temperature == 0.1 and cfg.data.stream_buffer == 5
    assert cfg.data.batch_size == 64 and cfg.model.lr == NODES["SimCSEModule"]["lr"]
    with pytest.raises(Exception, match="temprature"):
        compose_train(["model=simcse", "model.temprature=0.1"])


def test_evaluate_takes_the_scorers_own_defaults(tmp_path):
    cfg = compose_evaluate_config(tmp_path, [])
    assert cfg.scorer_options.sbert_wk.layer_start == "auto"
    assert cfg.scorer_options.sen2pro.seed == cfg.seed  # wiring: Sen2Pro samples follow the run's seed
    assert OmegaConf.to_container(cfg.encoder) == NODES["encoder_options"]


def test_a_default_that_is_not_a_literal_is_refused_by_name(tmp_path, monkeypatch):
    package = tmp_path / "sts_lightning_plant"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "thing.py").write_text(textwrap.dedent("""
        LIMIT = 3
        NAMES = ("p", "q")
        class Thing:
            def __init__(self, a: int = LIMIT, b=(1, 2), *, c: str = NAMES[1], d=object()):
                pass
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"Thing\(d=\.\.\.\).*object\(\)"):
        cd.signature_defaults("sts_lightning_plant.thing.Thing")
    (package / "thing.py").write_text((package / "thing.py").read_text().replace(", d=object()", ""))
    cd._parse.cache_clear()
    assert cd.signature_defaults("sts_lightning_plant.thing.Thing") == {"a": 3, "b": [1, 2], "c": "q"}


def test_hydra_finds_the_nodes_in_a_fresh_process():
    """No call of ours: Hydra's plugin discovery (``hydra_plugins/sts_lightning_defaults``) registers them, as it
    does in a user's own Hydra app composing our configs."""
    code = ("from hydra import compose, initialize_config_dir\n"
            f"with initialize_config_dir(config_dir={str(CONFIG_DIR)!r}, version_base='1.3'):\n"
            "    cfg = compose(config_name='train', overrides=['model=simcse', 'paths.data_dir=/d'])\n"
            "print(cfg.model.temperature, cfg.data.batch_size)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(NODES["SimCSEModule"]["temperature"]), "64"]
