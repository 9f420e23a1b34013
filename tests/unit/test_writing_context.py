"""The writer keeps context: no quote opens with a reference to a sentence it did not take,
no heading repeats the title, and sections follow the order of the brief's terms."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import roles
from roles.artifacts import Evidence, Passage
from roles.corpus import load_corpus
from roles.ranking import collect_evidence
from roles.reviewing import parse_blocks, review
from roles.writing import opens_with_reference, write_draft

pytestmark = pytest.mark.unit

SAMPLE = Path(roles.__file__).parent / "sample_corpus"


def _passage(source: str, text: str) -> Passage:
    return Passage(
        source=source,
        source_digest=hashlib.sha256(text.encode()).hexdigest(),
        start=0,
        end=len(text),
        text=text,
    )


def _evidence(*passages: Passage) -> Evidence:
    return Evidence(brief="b", passages=passages, files_read=len({p.source for p in passages}))


@pytest.mark.parametrize(
    "sentence",
    [
        "It is a low-floor vehicle.",
        "Before that, patrons waited.",
        "They moved in 1990.",
        "This branch opened.",
        "\u201cThey said so,\u201d he wrote.",
        "After that the hall closed.",
        "Its roof leaked.",
    ],
)
def test_sentences_that_lean_on_an_earlier_one_are_recognised(sentence: str) -> None:
    assert opens_with_reference(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        "The bookmobile has a lift.",
        "Items are lent for three weeks.",
        "Iteration is slow.",
        "Thistle grows by the wall.",
        "Theyre is no word.",
    ],
)
def test_sentences_that_stand_alone_are_not(sentence: str) -> None:
    assert not opens_with_reference(sentence)


def test_a_referring_sentence_is_taken_with_the_sentence_before_it() -> None:
    text = (
        "The current bookmobile entered service in 2016. It is a low-floor vehicle with a wheelchair lift."
        " Patrons can get a library card at its small desk."
    )
    draft = write_draft("bookmobile wheelchair lift", _evidence(_passage("bookmobile.md", text)))

    quotes = [c.quote for c in draft.citations]
    assert (
        "The current bookmobile entered service in 2016. It is a low-floor vehicle with a wheelchair lift."
        in quotes
    )
    assert all(not opens_with_reference(q) for q in quotes)


def test_a_referring_sentence_that_opens_its_passage_is_not_used() -> None:
    evidence = _evidence(
        _passage("hours.md", "Before that, patrons waited outside the reading room in the rain."),
        _passage("hours.md", "The reading room opens at nine every morning for patrons."),
    )
    draft = write_draft("reading room patrons", evidence)
    assert [c.quote for c in draft.citations] == ["The reading room opens at nine every morning for patrons."]


def test_no_quote_of_the_sample_draft_opens_with_an_unresolved_reference() -> None:
    brief = "Write a short history of the Millbrook public library network, its branches and the bookmobile."
    evidence = collect_evidence(brief, load_corpus(SAMPLE))
    draft = write_draft(brief, evidence)
    assert draft.citations
    assert all(not opens_with_reference(c.quote) for c in draft.citations)
    report = review(draft.markdown, draft.citations, corpus_root=SAMPLE, brief=brief, version_digest="d" * 64)
    assert report.verdict == "pass", report.findings


def test_no_heading_repeats_the_title() -> None:
    evidence = _evidence(
        _passage(
            "history-of-the-canal.md", "The canal opened in 1794 with twelve locks. Barges carried coal."
        ),
        _passage("history-of-the-canal.md", "The canal closed to traffic in 1931 after a long decline."),
        _passage("locks.md", "The canal locks were rebuilt in stone in 1850 by the company."),
        _passage("locks.md", "The canal lock gates were replaced with oak in 1952."),
    )
    draft = write_draft("History of the canal", evidence)

    headings = [b.text for b in parse_blocks(draft.markdown) if b.kind == "heading"]
    assert headings[0] == draft.title == "History of the Canal"
    assert all(h.casefold() != draft.title.casefold() for h in headings[1:])


def test_sections_follow_the_order_of_the_brief_terms() -> None:
    facts = {
        "sale.md": [
            "The book sale raised money for new shelves in 2019.",
            "The book sale is held every May in the hall.",
        ],
        "riverside.md": [
            "The riverside branch opened in 1964 near the ferry.",
            "The riverside branch has a reading garden.",
        ],
        "mobile.md": [
            "The bookmobile visits nine villages every week.",
            "The bookmobile carries about three thousand items.",
        ],
    }
    # Ranked so that the book sale comes first and the bookmobile last.
    evidence = _evidence(*[_passage(src, " ".join(sentences)) for src, sentences in facts.items()])
    draft = write_draft("The bookmobile, the riverside branch and the book sale", evidence)

    headings = [b.text for b in parse_blocks(draft.markdown) if b.kind == "heading"][1:-1]
    # Named by the brief's terms the sources hold ("Bookmobile" would repeat the title: the file's name).
    assert headings == ["Mobile", "Riverside Branch", "Book Sale"]
