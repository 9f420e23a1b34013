"""The document body of the reviewer's workspace (document.py) and the quote's context (source_context.py)."""

from __future__ import annotations

from orchestrator.entrypoints.web.document import anchor_of, render_document, sentence_pieces
from orchestrator.entrypoints.web.source_context import quote_context
from roles.sentences import claims
from tests.support.web import tags

DIGEST = "a" * 64
MARKDOWN = """# The library

The library opened in 1901. [1] The library owns ten million robots. It has a bookmobile [2].

## Sources

- [1] history.md
- [2] bookmobile.md
"""
CITATIONS = [
    {
        "marker": "[1]",
        "source": "history.md",
        "quote": "The library opened in 1901.",
        "source_digest": DIGEST,
    },
    {"marker": "[2]", "source": "bookmobile.md", "quote": "It has a bookmobile", "source_digest": DIGEST},
]


def test_sentences_are_numbered_as_the_reviewer_numbers_them() -> None:
    paragraph = (
        "The library opened in 1901. [1] The library owns ten million robots. It has a bookmobile [2]."
    )
    text, pieces = sentence_pieces(paragraph)
    expected = claims(paragraph)
    assert [n for n, _, _ in pieces] == [c.number for c in expected]
    assert text[pieces[0][1] : pieces[0][2]] == "The library opened in 1901. [1]"  # the marker after the stop
    assert text[pieces[1][1] : pieces[1][2]] == "The library owns ten million robots."


def test_finding_locations_name_elements() -> None:
    assert anchor_of("paragraph 2 sentence 3") == "p2s3"
    assert anchor_of("paragraph 1") == "p1"
    assert anchor_of("heading 2") == "h2"
    assert anchor_of("reference 4") == "r4"
    assert anchor_of("citation [7]") == "c7"
    assert anchor_of("draft") is None


def test_markers_open_asides_and_findings_sit_on_their_sentence() -> None:
    contexts = {
        "[1]": {
            "lines": quote_context("Intro\nThe library opened in 1901.\nMore", CITATIONS[0]["quote"]),
            "changed": True,
        },
    }
    findings = [
        {
            "rule": "unsupported-sentence",
            "location": "paragraph 1 sentence 2",
            "message": "no quote backs it",
        },
        {"rule": "quote-not-in-text", "location": "citation [2]", "message": "m", "severity": "warning"},
    ]
    page = str(render_document(MARKDOWN, CITATIONS, contexts, findings))
    found = tags(page)
    links = [a for t, a in found if t == "a" and "cite" in a.get("class", "").split()]
    assert [a["href"] for a in links] == ["#q-p1-1", "#q-p1-2"]
    asides = [a["id"] for t, a in found if t == "aside"]
    assert asides == ["q-p1-1", "q-p1-2"]
    assert (
        '<span class="sentence" id="p1s2"><span class="flag f-error" title="unsupported-sentence: no quote backs it">'
        in page
    )
    assert 'href="#finding-1"' in page and 'href="#finding-2"' in page
    assert "has-finding" in links[1]["class"]  # the citation a finding is about
    assert "<mark>The library opened in 1901.</mark>" in page
    assert "has changed since it was cited" in page
    assert '<li id="r1">' in page and 'href="#cite-1"' in page


def test_markup_in_the_document_and_its_sources_is_text() -> None:
    hostile = '"><img src=x onerror=alert(1)>'
    markdown = f"# Title {hostile}\n\nA claim {hostile} here. [1]\n"
    citations = [{"marker": "[1]", "source": hostile + ".md", "quote": hostile, "source_digest": DIGEST}]
    page = str(render_document(markdown, citations, {"[1]": {"problem": hostile}}, [{"location": hostile}]))
    assert not [t for t, _ in tags(page) if t in ("img", "script")]
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_the_quote_is_found_with_its_lines_around_it() -> None:
    source = "one\ntwo\nthree four\nfive six\nseven\neight\nnine\n"
    lines = quote_context(source, "four five", around=1)  # spread over two lines
    assert lines is not None
    assert [line.number for line in lines] == [2, 3, 4, 5]
    assert lines[1].pieces == (("three ", False), ("four", True))
    assert lines[2].pieces == (("five", True), (" six", False))
    assert quote_context(source, "absent words") is None
