"""The keyword arguments a config's ``_target_`` class takes, read from its source file without importing it.

Why: Hydra's hint for an unknown key is to append it with ``+`` (``+model.temprature=0.1``), which composes fine
and then fails 12 s later, after torch, Lightning and transformers have loaded, with ``TypeError: __init__() got
an unexpected keyword argument``. Importing the target to read its signature would load torch too, so the source
is parsed instead (``ast``): the class's ``__init__`` parameters, and through ``**kwargs`` those of its base classes
that can be found the same way (``from x import Base`` in the same file). Whenever a step cannot be followed (a
base from a package we cannot read, a ``*args`` signature, a dataclass), the answer is ``None``: "unknown", and
``train()`` still turns the constructor's ``TypeError`` into one line (``runs.train_run._build``).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from functools import lru_cache
from pathlib import Path


def target_args(target: str) -> frozenset[str] | None:
    """Keyword names that ``target`` (``pkg.module.Class``) accepts, or ``None`` when it takes any or is unknown."""
    module, _, name = str(target).rpartition(".")
    path = module_file(module)
    if path is None or not name:
        return None
    return _class_args(path, name, depth=0)


def class_constant(target: str, name: str) -> object:
    """The literal a ``target`` class (``pkg.module.Class``) or its first bases assign to ``name`` in their body
    (``name = ...`` or ``name: ClassVar[...] = ...``), read from the source; ``UNKNOWN`` when it cannot be followed.

    Why: a class-level switch such as ``matryoshka_ok`` decides whether an option applies; reading it here lets the
    early checks refuse the option before torch loads, with the line the constructor would give.
    """
    module, _, cls = str(target).rpartition(".")
    path = module_file(module)
    return UNKNOWN if path is None or not cls else _constant(path, cls, name, depth=0)


def module_file(module: str) -> Path | None:
    """The ``.py`` file of a dotted module name, found on disk without running any package's ``__init__``.

    Why not ``importlib.util.find_spec("a.b.c")``: it imports ``a`` and ``a.b`` first, and ``lightning`` or
    ``transformers`` take seconds. Only the top-level package is located (``find_spec`` of a top-level name
    runs nothing) or read from ``sys.modules`` (``sts_lightning``, whose ``__path__`` maps the checkout in).
    """
    parts = module.split(".")
    if not parts[0]:
        return None
    top = sys.modules.get(parts[0])
    if top is not None and hasattr(top, "__path__"):
        dirs = [Path(p) for p in top.__path__]
    else:
        try:
            spec = importlib.util.find_spec(parts[0])
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
        if spec.submodule_search_locations is None:
            return Path(spec.origin) if len(parts) == 1 and spec.origin else None
        dirs = [Path(p) for p in spec.submodule_search_locations]
    if len(parts) == 1:
        return next((d / "__init__.py" for d in dirs if (d / "__init__.py").is_file()), None)
    for i, part in enumerate(parts[1:], start=2):
        last = i == len(parts)
        found = None
        for folder in dirs:
            if last and (folder / f"{part}.py").is_file():
                return folder / f"{part}.py"
            if (folder / part).is_dir():
                found = folder / part
                break
        if found is None:
            return None
        if last:
            init = found / "__init__.py"
            return init if init.is_file() else None
        dirs = [found]
    return None


@lru_cache(maxsize=64)
def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def _class_args(path: Path, name: str, depth: int) -> frozenset[str] | None:
    tree = _parse(path)
    if tree is None or depth > 8:
        return None
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if node is None:  # re-exported: follow ``from x import name`` once
        origin = _imported(tree, name)
        return _class_args(*origin, depth + 1) if origin else None
    if any(_decorator_name(d) == "dataclass" for d in node.decorator_list):
        return None
    init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:  # inherited: the first base's constructor (no bases: object takes nothing)
        return _base_args(tree, path, node, depth) if node.bases else frozenset()
    args = init.args
    if args.vararg is not None:
        return None
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]} - {"self"}
    if args.kwarg is None:
        return frozenset(names)
    inherited = _base_args(tree, path, node, depth)
    return None if inherited is None else frozenset(names | inherited)


def _base_args(tree: ast.Module, path: Path, node: ast.ClassDef, depth: int) -> frozenset[str] | None:
    """The arguments of the first base class, when its source can be found (else ``None``)."""
    base = node.bases[0] if node.bases else None
    if not isinstance(base, ast.Name):
        return None  # ``L.LightningModule``, a call, a subscript: not followed
    if any(isinstance(n, ast.ClassDef) and n.name == base.id for n in tree.body):
        return _class_args(path, base.id, depth + 1)
    origin = _imported(tree, base.id)
    return _class_args(*origin, depth + 1) if origin else None


def _imported(tree: ast.Module, name: str) -> tuple[Path, str] | None:
    """Where ``from <module> import <x> [as name]`` in ``tree`` takes ``name`` from: (file, original name)."""
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:  # relative: not followed
            for alias in stmt.names:
                if (alias.asname or alias.name) == name:
                    source = module_file(stmt.module)
                    return (source, alias.name) if source else None
    return None


UNKNOWN = object()


def _constant(path: Path, cls: str, name: str, depth: int) -> object:
    tree = _parse(path)
    node = None if tree is None or depth > 8 else \
        next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    if node is None:
        origin = _imported(tree, cls) if tree is not None and depth <= 8 else None
        return _constant(*origin, name, depth + 1) if origin else UNKNOWN
    for stmt in node.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) \
            and stmt.value is not None else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            try:
                return ast.literal_eval(stmt.value)
            except ValueError:
                return UNKNOWN  # an expression: only running the code would tell
    base = node.bases[0] if node.bases else None
    if not isinstance(base, ast.Name):
        return UNKNOWN
    if any(isinstance(n, ast.ClassDef) and n.name == base.id for n in tree.body):
        return _constant(path, base.id, name, depth + 1)
    origin = _imported(tree, base.id)
    return _constant(*origin, name, depth + 1) if origin else UNKNOWN


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
