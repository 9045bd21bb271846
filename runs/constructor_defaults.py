"""Each default written once: the constructors' signatures ARE the configs' defaults (issue 40, part 4).

Why the constructor, not the yaml: a Python user who builds ``SimCSEModule()`` or ``SentenceDataModule(files=...)``
in a notebook must get what ``python train.py model=simcse`` trains, and a yaml that repeats the signature drifts
from it (it did: ``data=sentences`` said batch 16 where the class said 64). So each LightningModule, DataModule and
option-taking scorer keeps its defaults in its signature, and this module turns the signature into a Hydra node
registered in Hydra's ConfigStore as ``constructor/<ClassName>``. A yaml *departs* from it and writes nothing else:

    defaults:
      - /constructor@model: SimCSEModule      # every option of SimCSEModule.__init__, at its default
    model:
      lr: 5.0e-5                              # only what this recipe changes

Every key stays overridable on the command line (``model.temperature=0.1``), and a misspelt one is still refused,
because the node holds every keyword the constructor takes (its bases' too where it passes ``**base`` on).

Why the source is read (``ast``) rather than imported: the nodes must exist before Hydra composes anything, and
``--help`` and the override check compose in 0.1 s without torch; importing the LightningModules costs ~5 s. A
default must therefore be a literal (or a module-level constant bound to one); anything else is refused with the
class and argument named. ``tests/runs/test_constructor_defaults.py`` checks the reading equals ``inspect`` on the
imported classes.

Registration: every entry point that composes (``train.py`` / ``evaluate.py`` and their console scripts, the override
check, ``sl.train``, ``sl.load``, pipelines, the tests' conftest) calls :func:`register` first. Hydra also imports
``hydra_plugins/sts_lightning_defaults`` when it looks for plugins, which registers the nodes for a user's own Hydra
app composing our configs; that discovery works from a wheel and from a checkout's root, but not through an
editable install's import hook (Hydra walks the ``hydra_plugins`` namespace's directories), hence the explicit calls.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path
from typing import Any

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.registry import scorer_groups, trained_methods

GROUP = "constructor"
MISSING = "???"  # OmegaConf's mandatory value: an argument without a default must be set by the config
SKIPPED = ("self", "encoder")  # a scorer's encoder is passed in by evaluate, never configured
PACKAGE = "sts_lightning"
DATAMODULE_FOLDER = "datamodules"
LOAD_ENCODER = f"{PACKAGE}.embeddings.encoders.load.load_encoder"  # evaluate.yaml's ``encoder`` options


@functools.cache
def _module_source(module: str) -> tuple[ast.Module, str]:
    """The parsed source of ``module`` (found without importing it)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ConfigError(f"constructor defaults: cannot find the source of module {module!r}")
    return ast.parse(Path(spec.origin).read_text(), filename=spec.origin), spec.origin


def _top_level(tree: ast.Module, name: str) -> ast.AST | None:
    """The class, function or constant assignment named ``name`` at module level."""
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return node
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node
    return None


def _imported_from(tree: ast.Module, name: str) -> tuple[str, str] | None:
    """``(pkg.mod, original name)`` where ``from pkg.mod import original [as name]`` brings ``name`` in."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return node.module, alias.name
    return None


def _lookup(module: str, name: str) -> tuple[str, ast.AST] | None:
    """Where ``name`` (as seen from ``module``) is defined: ``(defining module, node)``, within this package only."""
    tree, _ = _module_source(module)
    node = _top_level(tree, name)
    if node is not None:
        return module, node
    imported = _imported_from(tree, name)
    if imported and imported[0].split(".")[0] == PACKAGE:
        return _lookup(*imported)
    return None


def _value(expr: ast.expr, module: str, where: str) -> Any:
    """A default's value: a literal, a module constant bound to one, or an item of such a constant (``NAMES[0]``);
    tuples become lists, as in a yaml."""
    if isinstance(expr, ast.Subscript):
        return _plain(_value(expr.value, module, where)[_value(expr.slice, module, where)])
    try:
        value = ast.literal_eval(expr)
    except ValueError:
        found = _lookup(module, expr.id) if isinstance(expr, ast.Name) else None
        if found is None or not isinstance(found[1], (ast.Assign, ast.AnnAssign)) or found[1].value is None:
            raise ConfigError(f"{where}: its default {ast.unparse(expr)!r} is not a literal or a module constant; "
                              "write it as one (configs read it from the source)") from None
        return _value(found[1].value, found[0], where)
    return _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _init(cls: ast.ClassDef) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)


def _parameters(function: ast.FunctionDef, module: str, owner: str) -> tuple[dict[str, Any], bool]:
    """``({name: default or MISSING}, takes **kwargs)`` of a ``def``, in signature order."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaults: dict[str, Any] = {}
    first_default = len(positional) - len(args.defaults)
    for i, arg in enumerate(positional):
        if arg.arg in SKIPPED:
            continue
        default = args.defaults[i - first_default] if i >= first_default else None
        defaults[arg.arg] = MISSING if default is None else _value(default, module, f"{owner}({arg.arg}=...)")
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if arg.arg not in SKIPPED:
            defaults[arg.arg] = MISSING if default is None else _value(default, module, f"{owner}({arg.arg}=...)")
    return defaults, args.kwarg is not None


def _base_name(expr: ast.expr) -> str | None:
    return expr.id if isinstance(expr, ast.Name) else None


def signature_defaults(target: str) -> dict[str, Any]:
    """Every keyword ``target``'s constructor takes, with its default (``MISSING`` where it has none).

    ``target`` is ``package.module.Class`` (or ``package.module:Class``); a class or a plain function. Where the
    ``__init__`` passes ``**kwargs`` on (or the class has none of its own), its bases' arguments are reached too,
    so they are merged, the class's own defaults winning; bases outside this package (Lightning's) add nothing.
    """
    module, _, name = target.replace(":", ".").rpartition(".")
    found = _lookup(module, name)
    if found is None:
        raise ConfigError(f"constructor defaults: {name!r} is not defined in {module!r}")
    module, node = found
    if isinstance(node, ast.FunctionDef):
        return _parameters(node, module, name)[0]
    if not isinstance(node, ast.ClassDef):
        raise ConfigError(f"constructor defaults: {target!r} is neither a class nor a function")
    init = _init(node)
    own, passes_on = _parameters(init, module, name) if init is not None else ({}, True)
    merged: dict[str, Any] = {}
    if passes_on:
        for base in reversed(node.bases):
            base_name = _base_name(base)
            where = _lookup(module, base_name) if base_name else None
            if where is not None and isinstance(where[1], ast.ClassDef):
                merged.update(signature_defaults(f"{where[0]}.{base_name}"))
    merged.update(own)
    return merged


def datamodule_targets() -> list[str]:
    """``sts_lightning.datamodules.<file>.<Class>`` of every ``*DataModule`` class in the datamodules folder."""
    package = importlib.util.find_spec(f"{PACKAGE}.{DATAMODULE_FOLDER}")
    targets = []
    for folder in package.submodule_search_locations:
        for path in sorted(Path(folder).glob("*.py")):
            module = f"{PACKAGE}.{DATAMODULE_FOLDER}.{path.stem}"
            tree, _ = _module_source(module)
            targets += [f"{module}.{n.name}" for n in tree.body
                        if isinstance(n, ast.ClassDef) and n.name.endswith("DataModule")]
    return targets


def model_targets() -> list[str]:
    """The LightningModule of every declared trained method (``embeddings.methods.registry``)."""
    return sorted({m.module.replace(":", ".") for m in trained_methods() if m.module})


def scorer_options() -> dict[str, dict[str, Any]]:
    """``{scorer name: its options' defaults}`` for the scorers that declare options (``evaluate.yaml``'s
    ``scorer_options``): only the declared options, and only those with a default (a required one, such as a
    path, has no default to write)."""
    options: dict[str, dict[str, Any]] = {}
    for group in scorer_groups():
        if not group.options:
            continue
        defaults = signature_defaults(group.target)
        chosen = {k: defaults[k] for k in group.options if k in defaults and defaults[k] != MISSING}
        if chosen:
            options.update({name: dict(chosen) for name in group.names})
    return options


@functools.cache
def nodes() -> dict[str, dict[str, Any]]:
    """``{node name: node}`` of everything registered: one node per class, ``scorer_options`` and
    ``encoder_options`` (``load_encoder``'s keywords but the name). Computed once a process; callers copy, never
    mutate it."""
    found: dict[str, dict[str, Any]] = {}
    for target in [*model_targets(), *datamodule_targets()]:
        name = target.rsplit(".", 1)[1]
        defaults = signature_defaults(target)
        if not defaults:
            continue  # a base without a constructor of its own (ResumableDataModule): nothing a config could set
        node = {"_target_": target, **defaults}
        if name in found and found[name] != node:
            raise ConfigError(f"constructor defaults: two classes named {name!r} ({found[name]['_target_']}, {target})")
        found[name] = node
    found["scorer_options"] = scorer_options()
    found["encoder_options"] = {k: v for k, v in signature_defaults(LOAD_ENCODER).items() if k != "name"}
    return found


_registered = False


def register() -> None:
    """Store every node in Hydra's ConfigStore under ``constructor/``, once per process (0.2 s: Hydra's import and
    the sources' parse)."""
    global _registered
    if _registered:
        return
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for name, node in nodes().items():
        store.store(group=GROUP, name=name, node=node, provider="sts-lightning")
    _registered = True
