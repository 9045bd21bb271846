"""Constructors read from their source, never imported (so configs compose and mistyped keys are refused without
torch): the defaults the configs depart from, and the keywords a ``_target_`` takes.

``SimCSEModule()`` must train what the command trains, so each class keeps its defaults in its signature and a yaml
departs from the node registered as ``constructor/<Class>`` (``defaults: [/constructor@model: SimCSEModule]``, then
only what it changes). Keywords: ``__init__``'s parameters (a dataclass: its fields) plus its bases' where it passes
``**kwargs`` on; ``*args`` or an unreadable base makes them unknown (``None``). Defaults: literals or module constants.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import sys
from pathlib import Path
from typing import Any

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.registry import scorer_groups, trained_methods

GROUP = "constructor"
MISSING = "???"  # OmegaConf's mandatory value: an argument without a default must be set by the config
SKIPPED = ("self", "encoder")  # a scorer's encoder is passed in by evaluate, never configured
PACKAGE = "sts_lightning"
LOAD_ENCODER = f"{PACKAGE}.embeddings.encoders.load.load_encoder"  # evaluate.yaml's ``encoder`` options
_DEPTH = 12


def module_file(module: str) -> Path | None:
    """The ``.py`` file of a dotted module name, found on disk without running a package's ``__init__`` (importing
    ``lightning`` takes seconds); the deepest package already imported gives the folders (its ``__path__``)."""
    parts = module.split(".")
    if not parts[0]:
        return None
    known = next((i for i in range(len(parts), 0, -1) if hasattr(sys.modules.get(".".join(parts[:i])), "__path__")), 0)
    if known:
        dirs = [Path(p) for p in sys.modules[".".join(parts[:known])].__path__]
    else:
        try:
            spec = importlib.util.find_spec(parts[0])
        except (ImportError, ValueError):
            return None
        if spec is None or spec.submodule_search_locations is None:
            return Path(spec.origin) if spec is not None and len(parts) == 1 and spec.origin else None
        dirs, known = [Path(p) for p in spec.submodule_search_locations], 1
    for i, part in enumerate(parts[known:], start=known + 1):
        if i == len(parts) and (file := next((d / f"{part}.py" for d in dirs if (d / f"{part}.py").is_file()), None)):
            return file
        dirs = [d / part for d in dirs if (d / part).is_dir()][:1]
        if not dirs:
            return None
    init = dirs[0] / "__init__.py"
    return init if init.is_file() else None


@functools.cache
def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def _find(module: str, name: str, depth: int = 0) -> tuple[str, ast.AST] | None:
    """Where ``name`` as seen from ``module`` is defined, ``(module, node)``, following ``from x import name``."""
    path = module_file(module)
    tree = _parse(path) if path is not None and depth < _DEPTH else None
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name or \
                isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets) or \
                isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return module, node
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:  # relative: not followed
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return _find(node.module, alias.name, depth + 1)
    return None


Params = dict[str, tuple[ast.expr | None, str]]  # name -> (default expression or None, module it is read in)


def _signature(module: str, name: str, depth: int = 0) -> tuple[Params, bool]:
    """``(parameters, complete)`` of a class or function (see the module docstring for the rule)."""
    found = _find(module, name) if depth < _DEPTH else None
    if found is None:
        return {}, False
    module, node = found
    if isinstance(node, ast.FunctionDef):
        return _parameters(node, module)
    if not isinstance(node, ast.ClassDef):
        return {}, False
    if any(_decorator(d) == "dataclass" for d in node.decorator_list):
        own = {s.target.id: (s.value, module) for s in node.body if isinstance(s, ast.AnnAssign)
               and isinstance(s.target, ast.Name) and "ClassVar" not in ast.unparse(s.annotation)}
        passes_on, complete = True, True
    else:
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        own, complete = _parameters(init, module) if init is not None else ({}, True)
        passes_on = init is None or init.args.kwarg is not None
        complete = complete or (init is not None and init.args.vararg is None and bool(node.bases))
    merged: Params = {}
    for base in reversed(node.bases if passes_on else []):
        inherited, known = _signature(module, base.id, depth + 1) if isinstance(base, ast.Name) else ({}, False)
        merged.update(inherited)
        complete = complete and known
    return {**merged, **own}, complete


def _parameters(function: ast.FunctionDef, module: str) -> tuple[Params, bool]:
    """A ``def``'s keywords with their default expressions; complete unless it takes ``*args`` or ``**kwargs``."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = {a.arg: (d, module) for a, d in [*zip(positional, defaults, strict=True),
                                              *zip(args.kwonlyargs, args.kw_defaults, strict=True)]
              if a.arg != "self"}
    return params, args.vararg is None and args.kwarg is None


def _decorator(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def target_args(target: str) -> frozenset[str] | None:
    """Keyword names ``target`` (``pkg.module.Class``) accepts, or ``None`` when it takes any or cannot be read."""
    module, _, name = str(target).replace(":", ".").rpartition(".")
    params, complete = _signature(module, name) if module and name else ({}, False)
    return frozenset(params) if complete else None


def signature_defaults(target: str) -> dict[str, Any]:
    """Every keyword of ``target`` (``pkg.module.Class`` or ``pkg.module:func``) with its default, else ``MISSING``."""
    module, _, name = target.replace(":", ".").rpartition(".")
    if _find(module, name) is None:
        raise ConfigError(f"constructor defaults: {name!r} is not defined in {module!r}")
    params, _ = _signature(module, name)
    return {key: MISSING if default is None else _value(default, where, f"{name}({key}=...)")
            for key, (default, where) in params.items() if key not in SKIPPED}


def _value(expr: ast.expr, module: str, where: str) -> Any:
    """A default's value: a literal, a module constant bound to one, or an item of one; tuples as lists (yaml)."""
    if isinstance(expr, ast.Subscript):
        return _plain(_value(expr.value, module, where)[_value(expr.slice, module, where)])
    try:
        return _plain(ast.literal_eval(expr))
    except ValueError:
        found = _find(module, expr.id) if isinstance(expr, ast.Name) else None
        if found is None or not isinstance(found[1], (ast.Assign, ast.AnnAssign)) or found[1].value is None:
            raise ConfigError(f"{where}: its default {ast.unparse(expr)!r} is not a literal or a module constant; "
                              "write it as one (configs read it from the source)") from None
        return _value(found[1].value, found[0], where)


def _plain(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return {k: _plain(v) for k, v in value.items()} if isinstance(value, dict) else value


def datamodule_targets() -> list[str]:
    """``sts_lightning.datamodules.<file>.<Class>`` of every ``*DataModule`` class in the datamodules folder."""
    folder = module_file(f"{PACKAGE}.datamodules").parent
    return [f"{PACKAGE}.datamodules.{path.stem}.{node.name}" for path in sorted(folder.glob("*.py"))
            for node in (_parse(path) or ast.Module(body=[])).body
            if isinstance(node, ast.ClassDef) and node.name.endswith("DataModule")]


def model_targets() -> list[str]:
    return sorted({m.module.replace(":", ".") for m in trained_methods() if m.module})


def scorer_options() -> dict[str, dict[str, Any]]:
    """``{scorer: its declared options' defaults}`` (``evaluate.yaml``'s ``scorer_options``); required ones left out."""
    options: dict[str, dict[str, Any]] = {}
    for group in scorer_groups():
        defaults = signature_defaults(group.target) if group.options else {}
        chosen = {k: defaults[k] for k in group.options if k in defaults and defaults[k] != MISSING}
        options.update({name: dict(chosen) for name in group.names} if chosen else {})
    return options


@functools.cache
def nodes() -> dict[str, dict[str, Any]]:
    """``{node name: node}``: one per class, ``scorer_options`` and ``encoder_options``; cached: never mutate it."""
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
    global _registered
    if _registered:
        return
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for name, node in nodes().items():
        store.store(group=GROUP, name=name, node=node, provider="sts-lightning")
    _registered = True
