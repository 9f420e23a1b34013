"""Section headings come from the sources' own headings or the brief, never a placeholder,
and the coherence check of the evaluation finds the layouts that mislead."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from evaluation.coherence import incoherent
from roles.artifacts import Evidence, Passage
from roles.headings import from_brief, heading_at, outline, usable
from roles.reviewing import parse_blocks
from roles.writing import write_draft

pytestmark = pytest.mark.unit

CANAL = """# The Old Canal

## Building

The canal opened in 1794 with twelve locks. Barges carried coal to the mills.

## Decline

The canal closed to traffic in 1931 after a long decline. The basin was filled in 1960.
"""


def _evidence(source: str, text: str) -> Evidence:
    digest = hashlib.sha256(text.encode()).hexdigest()
    passages = []
    for paragraph in text.split("\n\n"):
        if paragraph.startswith("#"):
            continue
        start = text.index(paragraph)
        passages.append(
            Passage(
                source=source, source_digest=digest, start=start, end=start + len(paragraph), text=paragraph
            )
        )
    return Evidence.model_validate({"brief": "canal", "passages": passages, "files_read": 1})


def test_outline_and_the_heading_a_sentence_sits_under() -> None:
    found = outline(CANAL)
    assert [(level, text) for _, level, text in found] == [
        (1, "The Old Canal"),
        (2, "Building"),
        (2, "Decline"),
    ]
    assert heading_at(found, CANAL.index("The canal opened")) == "Building"
    assert heading_at(found, CANAL.index("The basin")) == "Decline"
    assert heading_at((), 10) is None


@pytest.mark.parametrize(
    "heading", ["Source 1", "section 2", "Untitled", "", "History of the Canal", "Sources"]
)
def test_placeholders_and_echoes_are_not_usable(heading: str) -> None:
    assert not usable(heading, avoid=("History of the Canal", "Sources"))


def test_a_brief_term_heading_names_what_the_quotes_hold() -> None:
    assert from_brief("history of the canal locks", ["The locks were rebuilt."], avoid=()) == "Locks"
    assert from_brief("history of the canal locks", ["Nothing in common."], avoid=()) is None


def test_the_writer_heads_each_section_with_the_sources_own_heading() -> None:
    draft = write_draft(
        "history of the canal", _evidence("canal.md", CANAL), outlines={"canal.md": outline(CANAL)}
    )
    headings = [b.text for b in parse_blocks(draft.markdown) if b.kind == "heading"]
    assert headings[0] == draft.title
    assert all(h in ("Building", "Decline", "Sources") for h in headings[1:]), headings
    # Each quote sits under the heading its source puts it under.
    section = None
    for line in draft.markdown.splitlines():
        if line.startswith("## "):
            section = line[3:]
        for c in draft.citations:
            if c.marker in line and section not in (None, "Sources"):
                assert heading_at(outline(CANAL), CANAL.index(c.quote)) == section


def test_no_placeholder_heading_without_outlines() -> None:
    text = "The first fact about the canal is here. The second fact about the locks is there."
    evidence = _evidence("1.txt", text)
    draft = write_draft("history of the canal", evidence)
    headings = [b.text for b in parse_blocks(draft.markdown) if b.kind == "heading"]
    assert not any(h.startswith("Source ") for h in headings), headings


def test_the_coherence_check_finds_what_misleads(tmp_path: Path) -> None:
    (tmp_path / "canal.md").write_text(CANAL, encoding="utf-8")
    cites = [
        {"marker": "[1]", "source": "canal.md", "quote": "The canal opened in 1794 with twelve locks."},
        {"marker": "[2]", "source": "canal.md", "quote": "The basin was filled in 1960."},
    ]
    good = "# T\n\n## Building\n\nThe canal opened in 1794 with twelve locks. [1]\n\n## Decline\n\nThe basin was filled in 1960. [2]\n"
    assert incoherent(good, cites, tmp_path) == []
    bad = "# T\n\n## Source 1\n\nThe canal opened in 1794 with twelve locks. [1]\n\n## Building\n\nIt was filled in 1960. [2]\n"
    problems = incoherent(bad, cites, tmp_path)
    assert any(p.startswith("placeholder heading 'Source 1'") for p in problems)
    assert any(p.startswith("heading over other matter: 'Building' over [2]") for p in problems)
    assert any(p.startswith("opens without its antecedent") for p in problems)
