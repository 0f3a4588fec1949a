"""docs/design.md is the current guide to cmc's internals (docs/design.md, "How the code
is written"): at most 800 lines, a table of contents near the top whose entries are
exactly its `##` sections, no history told in it (history is docs/changelog.md's), and
the one figure it keeps, the walk of one step (experiments/deliver_walk.py), the one the
script measures on the code beside it."""
from __future__ import annotations

import importlib.util
import re

import pytest

from conftest import MODELS, ROOT

DESIGN = ROOT / "docs" / "design.md"
MAX_LINES = 800
CONTENTS_WITHIN = 40           # lines from the top that the table of contents starts in
WALK_HEADER = ("| functions | files | places | returns | places above linux "
               "| returns above linux |")
HISTORY_WORDS = re.compile(r"\b(before|was|used to)\b", re.IGNORECASE)
LINK = re.compile(r"\[([^\]]+)\]\(#([^)]+)\)")


def text() -> str:
    return DESIGN.read_text()


def prose_lines() -> list[tuple[int, str]]:
    """(line number, line) of the page outside its ``` blocks."""
    out, fenced = [], False
    for n, line in enumerate(text().splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append((n, line))
    return out


def sections() -> list[str]:
    return [line[3:].strip() for _, line in prose_lines() if line.startswith("## ")]


def anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def contents() -> list[tuple[str, str]]:
    """The table of contents: the links to anchors in the block of lines that starts
    with the first such link near the top and ends at the first blank line."""
    lines = text().splitlines()
    start = next((i for i, line in enumerate(lines[:CONTENTS_WITHIN]) if LINK.search(line)),
                 None)
    assert start is not None, f"no table of contents in the first {CONTENTS_WITHIN} lines"
    block = []
    for line in lines[start:]:
        if not line.strip():
            break
        block.append(line)
    return LINK.findall(" ".join(block))


def figure_in_the_guide() -> tuple[int, ...]:
    lines = text().splitlines()
    assert lines.count(WALK_HEADER) == 1, "the walk's table is in the guide once"
    at = lines.index(WALK_HEADER)
    assert set(lines[at + 1]) <= set("|- "), "a separator row under the header"
    cells = [c.strip() for c in lines[at + 2].strip().strip("|").split("|")]
    assert len(cells) == 6 and all(c.isdigit() for c in cells), lines[at + 2]
    return tuple(int(c) for c in cells)


def test_the_guide_is_at_most_800_lines():
    assert len(text().splitlines()) <= MAX_LINES


def test_the_contents_are_exactly_the_sections():
    found = contents()
    assert [title for title, _ in found] == sections()
    assert [a for _, a in found] == [anchor(title) for title, _ in found]


def test_the_guide_tells_no_history():
    said = [f"{n}: {line.strip()}" for n, line in prose_lines() if HISTORY_WORDS.search(line)]
    assert said == [], "history belongs in docs/changelog.md:\n" + "\n".join(said)


@pytest.fixture(scope="module")
def walk():
    spec = importlib.util.spec_from_file_location("deliver_walk",
                                                  ROOT / "experiments" / "deliver_walk.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_walk_of_one_step_is_the_one_the_script_measures(walk):
    """The row of "One step, read from end to end" is what experiments/deliver_walk.py
    measures on this tree, every column of it."""
    stops = walk.walk(str(MODELS / "durlog.model"))
    above = [s for s in stops if not s[0].startswith(walk.LINUX)]
    measured = (len(stops), len({f for f, _ in stops}), len(walk.places(stops)),
                walk.returns(stops), len(walk.places(above)), walk.returns(above))
    assert figure_in_the_guide() == measured, (
        "docs/design.md, \"One step, read from end to end\": write the row the script "
        "prints (python3 experiments/deliver_walk.py)")
