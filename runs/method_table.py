"""``python -m sts_lightning.runs.method_table``: the README's table of methods, printed from their declarations;
``--write`` refreshes README.md's, which ``tests/runs/test_method_table.py`` checks.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sts_lightning.embeddings.methods.declaration import CE_EXPORT, HF_EXPORT, ST_EXPORT, MethodDeclaration
from sts_lightning.embeddings.methods.registry import methods

START, END = "<!-- methods:start -->", "<!-- methods:end -->"
README = Path(__file__).resolve().parents[1] / "README.md"
EXPORTS = {ST_EXPORT: "sentence-transformers", HF_EXPORT: "Hugging Face encoder", CE_EXPORT: "CrossEncoder"}
TRAIN = "python train.py "  # the README says it once above the table; a trained row shows the rest


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _row(m: MethodDeclaration) -> str:
    paper = f"[{m.paper.short()}]({m.paper.url})" if m.paper is not None else "-"
    export = EXPORTS.get(m.export, f"`{m.export}`" if m.export else "-")
    data = f"`{m.data}`" if m.data else "-"
    command = m.command()
    command = command[len(TRAIN):] if command.startswith(TRAIN) else command
    cells = [f"**{m.title}** (`{m.name}`): {m.summary}", m.kind, paper, data, export, f"`{command}`"]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def table() -> str:
    """The markdown table: trained methods first, then the training-free ones, each in listing order."""
    ordered = [m for m in methods() if m.trained] + [m for m in methods() if not m.trained]
    head = ["| method | kind | paper | data group | export | command |", "|---|---|---|---|---|---|"]
    return "\n".join([*head, *map(_row, ordered)])


def readme_block(text: str) -> str:
    """What README.md holds between the markers (``""`` when they are missing)."""
    if START not in text or END not in text:
        return ""
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n")


def write(path: Path = README) -> None:
    text = path.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{path}: no {START} ... {END} block to fill")
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    path.write_text(f"{before}{START}\n{table()}\n{END}{after}", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the table into README.md instead of printing it")
    if parser.parse_args().write:
        write()
    else:
        print(table())


if __name__ == "__main__":
    main()
