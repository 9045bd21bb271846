"""The lists of names in README.md and docs/ are the generated ones (``runs/doc_lists.py``), and none is hand-written.

Why both checks: a block can go stale (a method added, the block not refreshed), and a new hand-written list can
appear outside any block (which is how README's scorer list came to lack ``simcse_mlp``).
"""

from __future__ import annotations

import re

from sts_lightning.embeddings.encoders.packaged import PACKAGED_MODELS
from sts_lightning.embeddings.methods.registry import methods, scorer_groups
from sts_lightning.runs import doc_lists
from tests.paths import ROOT

HAND_LIST = 4  # this many names of one kind on one line, outside a block, is a list someone will forget to extend


def test_every_block_holds_the_current_list():
    assert doc_lists.stale(ROOT) == [], "run: python -m sts_lightning.runs.doc_lists --write"


def test_the_lists_the_issue_found_incomplete_are_complete_now():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`simcse_mlp`" in dict(doc_lists.blocks(readme))["scorers"]
    assert {"`mlm`", "`tsdae`"} <= set(dict(doc_lists.blocks(readme))["st_exports"].split(", "))
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "`mlm`" in dict(doc_lists.blocks(architecture))["modules"]


def hand_lists(text: str) -> list[tuple[int, str, int]]:
    """``(line number, kind, count)`` for each line listing >= HAND_LIST names of one kind outside blocks / code."""
    kinds = {"method": {m.name for m in methods()}, "scorer": {n for g in scorer_groups() for n in g.names},
             "encoder": set(PACKAGED_MODELS)}
    found, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        ticked = set(re.findall(r"`([^`]+)`", doc_lists.BLOCK.sub("", line)))
        for kind, names in kinds.items():
            if not fenced and len(ticked & names) >= HAND_LIST:
                found.append((number, kind, len(ticked & names)))
    return found


def test_no_hand_written_list_outside_a_block():
    offenders = [f"{path.relative_to(ROOT)}:{n}: {count} {kind} names by hand"
                 for path in doc_lists.documents(ROOT) for n, kind, count in hand_lists(path.read_text(encoding="utf-8"))]
    assert offenders == [], "put them in a <!--list:NAME--><!--/list--> block (runs/doc_lists.py): " + "; ".join(offenders)


def test_the_guard_sees_a_hand_list_and_ignores_blocks_and_code():
    assert hand_lists("scorers: `cls`, `mean`, `max`, `sbert_wk`") == [(1, "scorer", 4)]
    assert hand_lists("x <!--list:poolings-->`cls`, `mean`, `max`, `last2_avg`<!--/list--> y") == []
    assert hand_lists("```\n`cls`, `mean`, `max`, `sbert_wk`\n```") == []


def test_write_refreshes_a_stale_block(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("scorers: <!--list:poolings-->`cls`<!--/list-->.\n", encoding="utf-8")
    assert doc_lists.stale(tmp_path) == ["README.md: list poolings"]
    assert doc_lists.write(tmp_path) == [tmp_path / "README.md"]
    assert doc_lists.stale(tmp_path) == []
    assert "`last3_avg`" in (tmp_path / "README.md").read_text(encoding="utf-8")
