"""AST layering check for the first-party packages (issue 17, docs/dev/status.md).

Why: architecture.md wants layers that only point down, so `python evaluate.py` loads no Lightning code and a
method can be found in one place. The check is a plain AST walk (no import-linter dependency): it reads every
import statement, module level or inside a function, and reports the ones that break a rule:

- "upward": a package imports a higher layer (`embeddings` < `sts` < {`datamodules`, `lightning_modules`,
  `callbacks`} < top level `train.py`, `evaluate.py`, `benchmarks/`).
- "sideways": a package imports another package of its own layer (e.g. `lightning_modules` -> `callbacks`).
- "lightning": `embeddings/` or `sts/` imports `lightning` / `pytorch_lightning`.
- "in-function": a first-party import inside a function (the usual way to dodge a cycle); imports of optional
  heavy third-party dependencies inside functions are fine, and so is the one deferred import of an entry
  point (`train.py`, `evaluate.py` import their `runs.*` module inside `main`, so `--help` answers without
  loading torch).
- "cycle": modules that import each other at module level (reported once per cycle, on its first file).
"""
from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

# Lowest layer first; a package may import its own package and any lower layer.
LAYERS: dict[str, int] = {
    "embeddings": 0,
    "sts": 1,
    "datamodules": 2, "lightning_modules": 2, "callbacks": 2,
    "benchmarks": 3, "train": 3, "evaluate": 3, "runs": 3, "sts_lightning": 3,
}
TOP_LEVEL = {"benchmarks", "train", "evaluate", "runs", "sts_lightning"}
IMPORT_NAME = "sts_lightning."  # the folders are installed as its sub-packages (setup.py); imports spell it
# may defer their runs.* import (fast --help): the commands (sts_lightning/) and the checkout's scripts calling them
ENTRY_POINTS = {"train.py", "evaluate.py", "sts_lightning/train.py", "sts_lightning/evaluate.py"}
LIGHTNING_FREE = {"embeddings", "sts"}
LIGHTNING = {"lightning", "pytorch_lightning"}


class Violation(NamedTuple):
    file: str      # path relative to the repository root, with "/" separators
    module: str    # the imported module as written (relative imports resolved)
    kind: str      # "upward" | "sideways" | "lightning" | "in-function" | "cycle"


def _package_of(rel_path: str) -> str:
    first = rel_path.split("/", 1)[0]
    return first[:-3] if first.endswith(".py") else first


def _imports(tree: ast.AST, rel_path: str) -> Iterable[tuple[str, bool]]:
    """(imported module, inside a function?) for every import statement in `tree`."""
    module_parts = rel_path[:-3].split("/")
    if module_parts[-1] == "__init__":
        module_parts = module_parts[:-1]
        package_parts = module_parts
    else:
        package_parts = module_parts[:-1]

    def visit(node: ast.AST, in_function: bool):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, in_function
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package_parts[:len(package_parts) - (child.level - 1)]
                    name = ".".join(base + ([child.module] if child.module else []))
                else:
                    name = child.module or ""
                yield name, in_function
            yield from visit(child, inner)

    yield from visit(tree, False)


def _folder_module(module: str) -> str:
    """The imported module named by its folder: "sts_lightning.embeddings.x" -> "embeddings.x"."""
    return module[len(IMPORT_NAME):] if module.startswith(IMPORT_NAME) else module


def check_source(source: str, rel_path: str) -> set[Violation]:
    """Violations in one file's source; `rel_path` (e.g. "embeddings/x.py") places it in its layer."""
    package = _package_of(rel_path)
    if package not in LAYERS:
        return set()
    found: set[Violation] = set()
    tree = ast.parse(source, filename=rel_path)
    for module, in_function in _imports(tree, rel_path):
        top = _folder_module(module).split(".", 1)[0]
        if top in LIGHTNING and package in LIGHTNING_FREE:
            found.add(Violation(rel_path, module, "lightning"))
        if top not in LAYERS:
            continue
        if in_function and not (rel_path in ENTRY_POINTS and top == "runs"):
            found.add(Violation(rel_path, module, "in-function"))
        if top == package or package in TOP_LEVEL:
            continue
        if LAYERS[top] > LAYERS[package]:
            found.add(Violation(rel_path, module, "upward"))
        elif LAYERS[top] == LAYERS[package]:
            found.add(Violation(rel_path, module, "sideways"))
    return found


def _module_name(rel_path: str) -> str:
    parts = rel_path[:-3].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_cycles(files: Mapping[str, str]) -> set[Violation]:
    """One violation per import cycle among first-party modules (module-level imports only).

    ``from pkg import name`` counts as an import of ``pkg.name`` when that is a module of the tree, else of ``pkg``.
    """
    modules = {_module_name(p): p for p in files}
    graph: dict[str, set[str]] = {}
    for module, rel_path in modules.items():
        edges: set[str] = set()
        for node in ast.parse(files[rel_path], filename=rel_path).body:
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _folder_module(next(iter(_imports(ast.Module(body=[node], type_ignores=[]), rel_path)))[0])
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            names = [_folder_module(n) for n in names]  # `import sts_lightning.x.y` names its folder module x.y
            edges |= {n for n in names if n in modules and n != module}
        graph[module] = edges
    found: set[Violation] = set()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for nxt in sorted(graph[module]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):]
                first = min(cycle)
                found.add(Violation(modules[first], " -> ".join(cycle[cycle.index(first):] + cycle[:cycle.index(first)]
                                                                + [first]), "cycle"))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def check_tree(files: Mapping[str, str]) -> set[Violation]:
    """Violations in an in-memory tree {relative path: source}."""
    found: set[Violation] = set()
    for rel_path, source in files.items():
        found |= check_source(source, rel_path)
    return found | module_cycles(files)


def repo_files(root: Path) -> dict[str, str]:
    """{relative path: source} for every first-party Python file under `root`."""
    files: dict[str, str] = {}
    for name in LAYERS:
        single = root / f"{name}.py"
        if single.is_file():
            files[single.name] = single.read_text(encoding="utf-8")
        folder = root / name
        if folder.is_dir():
            for path in sorted(folder.rglob("*.py")):
                files[path.relative_to(root).as_posix()] = path.read_text(encoding="utf-8")
    return files
