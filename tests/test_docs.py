"""The README and docs/ stay true: short enough to read, every relative link resolves, every code excerpt is real.

Why: the README grew into a 98 KB lab notebook and the "add a method" example in ``docs/architecture.md`` went stale
(an ``export`` signature the trainer no longer called that way). Now a code block preceded by
``<!-- from: <path> -->`` must be a verbatim excerpt of that file (a line ``...`` marks an omission; the pieces must
appear in the file in order), so moving or changing the code fails here, naming the block and the file.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_LIMIT = 20_000  # bytes: a page a newcomer reads in ten minutes
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
# Pages that name test files as they are now (docs/dev/ is history: it names files as they were then).
CURRENT_PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "results").glob("*.md"))]
TEST_PATH = re.compile(r"\btests/[A-Za-z0-9_/]+\.py\b")

FENCE = re.compile(r"^(```|~~~)")
FROM_TAG = re.compile(r"^<!--\s*from:\s*(\S+)\s*-->\s*$")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"`[^`]*`")
ELISION = "..."


def _prose_lines(text: str, drop_code: bool = True) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks; ``drop_code``: inline code removed (links there are examples)."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, INLINE_CODE.sub("", line) if drop_code else line))
    return out


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    for _, line in _prose_lines(page.read_text(encoding="utf-8"), drop_code=False):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            slug = _slug(match.group(1))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            if count:
                seen[f"{slug}-{count}"] = 1
    return set(seen)


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """Relative links of ``page`` whose file (or heading anchor, for a markdown target) does not exist."""
    problems = []
    for number, line in _prose_lines(page.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:, ...
                continue
            path_part, _, anchor = target.partition("#")
            resolved = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(root)}:{number}: link {target!r}"
            if not resolved.exists():
                problems.append(f"{where}: {resolved} does not exist")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                problems.append(f"{where}: no heading with anchor #{anchor} in {resolved.relative_to(root)}")
    return problems


def missing_test_files(page: Path, root: Path = ROOT) -> list[str]:
    """``tests/...py`` paths named anywhere in ``page`` (prose, inline code, code blocks) that do not exist."""
    return [f"{page.relative_to(root)}:{number}: {path} does not exist"
            for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
            for path in TEST_PATH.findall(line) if not (root / path).is_file()]


def tagged_blocks(page: Path) -> list[tuple[int, str, list[str]]]:
    """(line of the tag, source path, block lines) for every code block preceded by ``<!-- from: path -->``."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks = []
    for i, line in enumerate(lines):
        tag = FROM_TAG.match(line.strip())
        if not tag:
            continue
        if i + 1 >= len(lines) or not FENCE.match(lines[i + 1].strip()):
            blocks.append((i + 1, tag.group(1), None))  # a tag without its block: reported by excerpt_problem
            continue
        end = next((j for j in range(i + 2, len(lines)) if FENCE.match(lines[j].strip())), len(lines))
        blocks.append((i + 1, tag.group(1), lines[i + 2:end]))
    return blocks


def excerpt_problem(block: list[str] | None, source: Path) -> str | None:
    """Why ``block`` is not a verbatim, in-order excerpt of ``source`` (``None`` when it is)."""
    if block is None:
        return "the tag is not followed by a fenced code block"
    if not source.is_file():
        return f"{source} does not exist"
    text = [line.rstrip() for line in source.read_text(encoding="utf-8").splitlines()]
    chunks, chunk = [], []
    for line in block:
        if line.strip() == ELISION:
            chunks.append(chunk)
            chunk = []
        else:
            chunk.append(line.rstrip())
    chunks.append(chunk)
    position = 0
    for chunk in (c for c in chunks if c):
        size = len(chunk)
        found = next((i for i in range(position, len(text) - size + 1) if text[i:i + size] == chunk), None)
        if found is None:
            # name the first line of the piece that the file does not continue with
            best, best_len = None, 0
            for i in range(position, len(text)):
                n = 0
                while n < size and i + n < len(text) and text[i + n] == chunk[n]:
                    n += 1
                if n > best_len:
                    best, best_len = i, n
            if best is None:
                return f"the line {chunk[0]!r} is not in the file (after line {position})"
            got = text[best + best_len] if best + best_len < len(text) else "<end of file>"
            return (f"the excerpt's line {chunk[best_len]!r} differs from line {best + best_len + 1} of the file: "
                    f"{got!r}")
        position = found + size
    return None


def test_readme_is_short():
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes, over {README_LIMIT}: move detail into docs/"


def test_readme_has_one_method_table_between_markers():
    text = README.read_text(encoding="utf-8")
    assert text.count("<!-- methods:start -->") == 1 and text.count("<!-- methods:end -->") == 1
    assert text.index("<!-- methods:start -->") < text.index("<!-- methods:end -->")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_code_fences_are_closed(page):
    """An unclosed fence turns the rest of the page into code (and hides its links from the check below)."""
    fences = [n for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) if FENCE.match(line.strip())]
    assert len(fences) % 2 == 0, f"{page.relative_to(ROOT)}: odd number of code fences (lines {fences})"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    assert not broken_links(page), "\n".join(broken_links(page))


@pytest.mark.parametrize("page", CURRENT_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_test_files_exist(page):
    """Test files get renamed and split (issue 28); a page that points at the old name sends a reader nowhere."""
    assert not missing_test_files(page), "\n".join(missing_test_files(page))


def test_worked_example_is_tagged():
    """The "add a method" example is checked code, not prose that can go stale unnoticed."""
    blocks = tagged_blocks(ROOT / "docs" / "architecture.md")
    assert len(blocks) >= 4, "docs/architecture.md lost its tagged (<!-- from: path -->) excerpts"


@pytest.mark.parametrize("page", [p for p in PAGES if tagged_blocks(p)], ids=lambda p: str(p.relative_to(ROOT)))
def test_tagged_blocks_are_verbatim_excerpts(page):
    problems = []
    for number, source, block in tagged_blocks(page):
        problem = excerpt_problem(block, ROOT / source)
        if problem:
            problems.append(f"{page.relative_to(ROOT)}: the block tagged at line {number} (from: {source}): {problem}")
    assert not problems, "update the excerpt to the file as it is now:\n" + "\n".join(problems)


def test_excerpt_check_catches_a_change(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("a = 1\n\ndef f():\n    return a\n\nb = 2\n")
    assert excerpt_problem(["def f():", "    return a"], source) is None
    assert excerpt_problem(["a = 1", "...", "b = 2"], source) is None
    assert "differs from line 4" in excerpt_problem(["def f():", "    return 2"], source)
    assert excerpt_problem(["b = 2", "...", "a = 1"], source) is not None  # out of order
    assert "does not exist" in excerpt_problem(["x"], tmp_path / "gone.py")


def test_link_check_catches_a_broken_link(tmp_path):
    (tmp_path / "there.md").write_text("# A heading\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#a-heading) [gone](missing.md) [anchor](there.md#nope) `[code](x.md)`\n")
    problems = broken_links(page, root=tmp_path)
    assert len(problems) == 2 and "missing.md" in problems[0] and "#nope" in problems[1]


def test_test_path_check_catches_a_missing_file(tmp_path):
    (tmp_path / "tests" / "runs").mkdir(parents=True)
    (tmp_path / "tests" / "runs" / "test_there.py").write_text("")
    page = tmp_path / "page.md"
    page.write_text("`tests/runs/test_there.py` and tests/runs/test_gone.py\n```\npytest tests/test_old.py\n```\n")
    problems = missing_test_files(page, root=tmp_path)
    assert problems == ["page.md:1: tests/runs/test_gone.py does not exist", "page.md:3: tests/test_old.py does not exist"]


def test_readme_multi_node_line_is_the_one_the_two_node_test_runs():
    """The issue's ask: the README's several-nodes commands are what ``tests/runs/test_several_nodes.py`` launches
    (less its test-only overrides: the tiny model and data, 3 steps)."""
    from tests.runs.two_nodes import node_command

    command = node_command(0, 29500, Path("runs/two_nodes"), [])
    tested = " ".join(["torchrun", *[a for a in command[3:] if a != "trainer.max_steps=3"]])
    shown = re.sub(r"\s*\\\n\s*", " ", README.read_text(encoding="utf-8"))
    assert tested in shown, tested
