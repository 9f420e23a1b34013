"""Revising the head's own text: what is dropped, what is kept byte for byte."""

from __future__ import annotations

import pytest

from roles.artifacts import Citation, Draft, Finding
from roles.revising import NothingLeft, revise, ruled_out
from roles.writing import DROP_QUOTE_RULES, PERSON_REJECTED

DIGEST = "0" * 64
TEXT = """# Branches

A person's own opening line. The river branch opened in 1902. [1] It moved in 1950. [2]

## Hours

The library opens at nine [3]. A person added this uncited aside.

## Gone soon

Only this sentence is here. [4]

## Sources

- [1] branches.md
- [2] branches.md
- [3] hours.md
- [4] other.md
"""


def _draft(markdown: str = TEXT) -> Draft:
    quotes = {
        "[1]": "The river branch opened in 1902.",
        "[2]": "It moved in 1950.",
        "[3]": "The library opens at nine",
        "[4]": "Only this sentence is here.",
    }
    cites = tuple(Citation(marker=m, source="x.md", quote=q, source_digest=DIGEST) for m, q in quotes.items())
    return Draft(title="Branches", markdown=markdown, citations=cites)


def test_nothing_named_returns_the_head_itself() -> None:
    head = _draft()
    assert revise(head, set()) is head
    assert revise(head, {"[9]"}) is head


def test_a_dropped_sentence_goes_and_every_other_byte_stays() -> None:
    revised = revise(_draft(), {"[2]"})
    assert "It moved in 1950." not in revised.markdown
    assert "A person's own opening line. The river branch opened in 1902. [1]\n" in revised.markdown
    assert "The library opens at nine [2]. A person added this uncited aside." in revised.markdown
    assert [c.marker for c in revised.citations] == ["[1]", "[2]", "[3]"]
    assert [c.quote for c in revised.citations][1] == "The library opens at nine"
    assert "- [2] hours.md\n- [3] other.md" in revised.markdown


def test_an_emptied_section_loses_its_heading_and_its_source_line() -> None:
    revised = revise(_draft(), {"[4]"})
    assert "## Gone soon" not in revised.markdown and "Only this sentence" not in revised.markdown
    assert "other.md" not in revised.markdown
    assert "## Hours" in revised.markdown and "## Sources" in revised.markdown
    assert "\n\n\n" not in revised.markdown and revised.markdown.endswith("\n")


def test_punctuation_after_the_marker_goes_with_its_sentence() -> None:
    revised = revise(_draft(), {"[3]"})
    assert "opens at nine" not in revised.markdown
    assert "\nA person added this uncited aside.\n" in revised.markdown


def test_nothing_left_is_refused() -> None:
    with pytest.raises(NothingLeft):
        revise(_draft(), {"[1]", "[2]", "[3]", "[4]"})


def test_findings_name_markers_by_citation_or_by_paragraph() -> None:
    head = _draft()
    findings = [
        Finding(rule=PERSON_REJECTED, location="citation [3]", message="no"),
        Finding(rule="quote-not-verbatim", location="paragraph 1", message="no"),
        Finding(rule="uncited-sentence", location="citation [4]", message="not a dropping rule"),
        Finding(rule=PERSON_REJECTED, location="draft", message="names nothing"),
    ]
    assert ruled_out(findings, head, DROP_QUOTE_RULES) == {"[1]", "[2]", "[3]"}
