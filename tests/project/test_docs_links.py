"""Every relative link in the README and docs/ leads somewhere: the file exists and, for a
``#fragment`` into Markdown, a heading there has that anchor (as GitHub spells anchors).

Pure Python over the files; links in code blocks and code spans are not links.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+).*?\1")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:


def prose_lines(page: Path) -> list[tuple[int, str]]:
    """(line number, text) of the lines outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped, lower case, punctuation but ``-``
    and ``_`` removed, each space a ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, repeats numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(page):
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[tuple[int, str]]:
    """(line number, target) of every relative link on a page."""
    found = []
    for number, line in prose_lines(page):
        for match in _LINK.finditer(_CODE_SPAN.sub("", line)):
            target = match.group(1)
            if not _EXTERNAL.match(target):
                found.append((number, target))
    return found


def broken(page: Path) -> list[str]:
    """What is wrong with each relative link on ``page``, one line each."""
    wrong = []
    for number, target in links(page):
        where = f"{page.relative_to(ROOT)}:{number}: {target}"
        path_text, _, fragment = target.partition("#")
        destination = (page.parent / unquote(path_text)).resolve() if path_text else page
        if not destination.exists():
            wrong.append(f"{where}: no such file")
        elif ROOT not in destination.parents and destination != ROOT:
            wrong.append(f"{where}: outside the repository")
        elif fragment and destination.suffix == ".md" and fragment not in anchors(destination):
            wrong.append(f"{where}: no heading with the anchor #{fragment}")
    return wrong


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken(page) == []


def test_the_anchors_are_githubs() -> None:
    assert slug("Control-plane ingest (target ≥ 20,000 events/s)") == (
        "control-plane-ingest-target--20000-eventss"
    )
    assert slug("Receipts: which rows, from where, committed when") == (
        "receipts-which-rows-from-where-committed-when"
    )
    assert slug("`pending`, `buffered`: [the modes](x.md)") == "pending-buffered-the-modes"
