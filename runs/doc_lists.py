"""``python -m sts_lightning.runs.doc_lists``: the lists of names in README.md and docs/, generated from the code;
``--write`` refreshes every block, which ``tests/runs/test_doc_lists.py`` checks.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path

from sts_lightning.embeddings.encoders.packaged import PACKAGED_MODELS
from sts_lightning.embeddings.methods.declaration import ST_EXPORT
from sts_lightning.embeddings.methods.pooling import POOLINGS
from sts_lightning.embeddings.methods.registry import methods, scorer_groups, trained_methods

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!--list:([a-z_]+)-->(.*?)<!--/list-->", re.DOTALL)


def _ticked(names, sep: str = ", ") -> str:
    return sep.join(f"`{n}`" for n in names)


def _scorers() -> str:
    """Every scorer name; those that read a fitted export say so (``path``), ``source`` its ``model``."""
    plain, fitted, parts = [], [], []
    for group in scorer_groups():
        if "path" in group.required or "path" in group.options:
            fitted.extend(group.names)
        elif "model" in group.options:
            parts.append(f"{_ticked(group.names)} (with `model`)")
        else:
            plain.extend(group.names)
    return ", ".join([_ticked(plain), _ticked(fitted, " / ") + " (with `path`)", *parts])


def _trained_titles() -> str:
    return ", ".join(f"`{m.name}` ({m.title})" for m in trained_methods())


def _modules() -> str:
    files = dict.fromkeys(m.module.split(":")[0].rsplit(".", 1)[1] for m in trained_methods() if m.module)
    return _ticked(files)


def _counts() -> str:
    trained = len(trained_methods())
    return f"{trained} trained methods and {len(methods()) - trained} training-free ones"


GENERATORS: dict[str, Callable[[], str]] = {
    "counts": _counts,
    "encoders": lambda: _ticked(n for n, m in PACKAGED_MODELS.items() if not m.masked_lm),  # masked LMs: generators
    "scorers": _scorers,
    "poolings": lambda: _ticked(POOLINGS),
    "trained": lambda: _ticked(m.name for m in trained_methods()),
    "trained_titles": _trained_titles,
    "st_exports": lambda: _ticked(m.name for m in trained_methods() if m.export == ST_EXPORT),
    "fitted_scorers": lambda: _ticked((n for g in scorer_groups() if "path" in g.required for n in g.names), " / "),
    "modules": _modules,
    "methods": lambda: _ticked(m.name for m in methods()),
}


def documents(root: Path = ROOT) -> list[Path]:
    """README.md and every page under docs/ (team notes included: they hold lists too)."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def render(name: str) -> str:
    if name not in GENERATORS:
        raise SystemExit(f"unknown list {name!r}; the lists: {', '.join(GENERATORS)}")
    return GENERATORS[name]()


def refreshed(text: str) -> str:
    return BLOCK.sub(lambda m: f"<!--list:{m.group(1)}-->{render(m.group(1))}<!--/list-->", text)


def stale(root: Path = ROOT) -> list[str]:
    """``path: list NAME`` for every block whose content differs from the generated list."""
    out = []
    for path in documents(root):
        for name, held in blocks(path.read_text(encoding="utf-8")):
            if held != render(name):
                out.append(f"{path.relative_to(root)}: list {name}")
    return out


def write(root: Path = ROOT) -> list[Path]:
    changed = []
    for path in documents(root):
        text = path.read_text(encoding="utf-8")
        new = refreshed(text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="refresh every block in README.md and docs/")
    if parser.parse_args().write:
        for path in write():
            print(f"updated {path.relative_to(ROOT)}")
    else:
        for name in GENERATORS:
            print(f"{name}: {render(name)}")


if __name__ == "__main__":
    main()
