"""README.md's table of methods is the one ``runs.method_table`` prints from the declarations, not a copy kept by hand."""

from __future__ import annotations

from sts_lightning.embeddings.methods.registry import methods
from sts_lightning.runs.method_table import README, TRAIN, readme_block, table


def test_the_readme_holds_the_generated_method_table():
    block = readme_block(README.read_text(encoding="utf-8"))
    assert block, "README.md has no <!-- methods:start --> ... <!-- methods:end --> block"
    assert block == table(), "README.md's method table is stale: python -m sts_lightning.runs.method_table --write"


def test_every_declared_method_has_a_row_with_its_command():
    rows = table().splitlines()[2:]
    assert len(rows) == len(methods())
    for declared in methods():
        # trained rows show `model=<name>` (README says the prefix once)
        command = "`" + declared.command().removeprefix(TRAIN).replace("|", "\\|") + "`"
        assert any(f"(`{declared.name}`)" in row and command in row for row in rows)
