"""The reviewer: every rule against real corpus files in tmp_path, and the full role loop."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

import roles
from roles.artifacts import Citation, Draft, Evidence, ReviewReport
from roles.corpus import load_corpus
from roles.ranking import collect_evidence
from roles.reviewing import parse_blocks, review
from roles.writing import write_draft

pytestmark = pytest.mark.unit

SAMPLE = Path(roles.__file__).parent / "sample_corpus"
BRIEF = "Write a short history of the Millbrook public library network, its branches and the bookmobile."
VERSION = "v" * 64


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    shutil.copytree(SAMPLE, root)
    return root


def _pipeline(root: Path, brief: str = BRIEF) -> tuple[Evidence, Draft]:
    evidence = collect_evidence(brief, load_corpus(root))
    return evidence, write_draft(brief, evidence)


def _review(
    root: Path,
    markdown: str,
    citations: tuple[Citation, ...],
    *,
    brief: str = BRIEF,
    suspicious_texts: Sequence[str] = (),
) -> ReviewReport:
    return review(
        markdown,
        citations,
        corpus_root=root,
        brief=brief,
        version_digest=VERSION,
        suspicious_texts=suspicious_texts,
    )


def _rules(report: ReviewReport) -> set[tuple[str, str]]:
    return {(f.rule, f.location) for f in report.findings}


def test_sample_corpus_end_to_end_passes(corpus: Path) -> None:
    evidence, draft = _pipeline(corpus)

    report = _review(
        corpus, draft.markdown, draft.citations, suspicious_texts=[p.text for p in evidence.suspicious]
    )

    assert report.verdict == "pass", report.findings
    assert report.findings == ()
    assert report.checked_citations == len(draft.citations) > 0
    assert report.version_digest == VERSION


@pytest.mark.parametrize(
    "brief",
    [
        "Millbrook library",
        "How does the bookmobile route change in winter?",
        "Digital services: e-books, computers and help sessions",
        "The Friends of the Library book sale",
        "Riverside Branch flood of 1979 and the Polish collection",
    ],
)
def test_other_briefs_on_the_sample_pass_too(corpus: Path, brief: str) -> None:
    evidence, draft = _pipeline(corpus, brief)

    report = _review(
        corpus,
        draft.markdown,
        draft.citations,
        brief=brief,
        suspicious_texts=[p.text for p in evidence.suspicious],
    )

    assert report.verdict == "pass", report.findings
    assert "friends-book-sale.md" not in {c.source for c in draft.citations}


def test_a_source_edited_after_drafting_is_source_changed(corpus: Path) -> None:
    _, draft = _pipeline(corpus)
    cited = draft.citations[0]
    path = corpus / cited.source
    path.write_text(path.read_text(encoding="utf-8") + "\nA line added later.\n", encoding="utf-8")

    report = _review(corpus, draft.markdown, draft.citations)

    assert report.verdict == "changes_requested"
    assert ("source-changed", f"citation {cited.marker}") in _rules(report)
    assert ("quote-not-verbatim", f"citation {cited.marker}") not in _rules(report)


def test_a_quote_edited_out_of_the_source_is_not_verbatim(corpus: Path) -> None:
    _, draft = _pipeline(corpus)
    cited = draft.citations[0]
    path = corpus / cited.source
    path.write_text(
        path.read_text(encoding="utf-8").replace(cited.quote, "Something else."), encoding="utf-8"
    )

    report = _review(corpus, draft.markdown, draft.citations)

    assert {
        ("source-changed", f"citation {cited.marker}"),
        ("quote-not-verbatim", f"citation {cited.marker}"),
    } <= _rules(report)


def test_a_forged_quote_is_not_verbatim(corpus: Path) -> None:
    _, draft = _pipeline(corpus)
    forged = draft.citations[1].model_copy(update={"quote": "The library was founded by pirates in 1650."})
    citations = (draft.citations[0], forged, *draft.citations[2:])
    markdown = draft.markdown.replace(" ".join(draft.citations[1].quote.split()), forged.quote)

    report = _review(corpus, markdown, citations)

    assert _rules(report) == {("quote-not-verbatim", "citation [2]")}
    assert report.verdict == "changes_requested"


def test_missing_and_escaping_sources(corpus: Path) -> None:
    _, draft = _pipeline(corpus)
    first, second = draft.citations[0], draft.citations[1]
    (corpus / first.source).unlink()
    escaping = second.model_copy(update={"source": "../../etc/passwd"})

    report = _review(corpus, draft.markdown, (first, escaping, *draft.citations[2:]))

    rules = _rules(report)
    assert ("source-missing", "citation [1]") in rules
    assert ("source-outside-corpus", "citation [2]") in rules
    assert ("reference-mismatch", "reference 2") in rules


def test_a_missing_corpus_folder_makes_every_source_missing(tmp_path: Path, corpus: Path) -> None:
    _, draft = _pipeline(corpus)
    report = _review(tmp_path / "gone", draft.markdown, draft.citations)
    assert {f.rule for f in report.findings} == {"source-missing"}
    assert len(report.findings) == len(draft.citations)


def test_markers_and_citations_must_match(corpus: Path) -> None:
    _, draft = _pipeline(corpus)
    last = draft.citations[-1]
    markdown = draft.markdown.replace(f" {last.marker}", " [99]", 1)

    report = _review(corpus, markdown, draft.citations)

    rules = _rules(report)
    assert ("unused-citation", f"citation {last.marker}") in rules
    assert any(rule == "dangling-marker" for rule, _ in rules)


def test_every_body_paragraph_cites(corpus: Path) -> None:
    _, draft = _pipeline(corpus)
    markdown = draft.markdown.replace("\n\n## ", "\n\nAn opinion with no source at all.\n\n## ", 1)

    report = _review(corpus, markdown, draft.citations)

    assert ("uncited-paragraph", "paragraph 2") in _rules(report)


def test_instruction_text_in_the_draft_is_a_leak(corpus: Path) -> None:
    evidence, draft = _pipeline(corpus)
    injected = next(p.text for p in evidence.suspicious if "Ignore your previous" in p.text)
    markdown = draft.markdown.replace("\n\n## ", f"\n\n{injected} [1]\n\n## ", 1)

    report = _review(corpus, markdown, draft.citations, suspicious_texts=[injected])

    rules = _rules(report)
    assert ("instruction-leak", "paragraph 2") in rules
    assert ("foreign-url", "paragraph 2") in rules
    assert sum(1 for f in report.findings if f.rule == "instruction-leak") >= 2


def test_quoting_a_suspicious_passage_is_a_leak_even_when_it_reads_plainly(corpus: Path) -> None:
    evidence, _ = _pipeline(corpus)
    plain = next(p for p in evidence.suspicious if "October" in p.text)
    quote = "The annual book sale takes place every October in the meeting hall of the Central Library."
    citation = Citation(marker="[1]", source=plain.source, quote=quote, source_digest=plain.source_digest)
    markdown = f"# Sale\n\n{quote} [1]\n\n## Sources\n\n- [1] {plain.source}\n"

    report = _review(corpus, markdown, (citation,), suspicious_texts=[p.text for p in evidence.suspicious])

    assert ("instruction-leak", "citation [1]") in _rules(report)


def test_urls_must_come_from_the_brief_and_from_a_cited_source(corpus: Path) -> None:
    _, draft = _pipeline(corpus)
    markdown = draft.markdown.replace("\n\n## ", " More at https://millbrook.example.org/history.\n\n## ", 1)

    foreign = _review(corpus, markdown, draft.citations)
    named = _review(
        corpus, markdown, draft.citations, brief=BRIEF + " Link https://millbrook.example.org/history."
    )

    assert ("foreign-url", "paragraph 1") in _rules(foreign)
    # The brief names it, but no cited source contains it: still flagged.
    assert ("foreign-url", "paragraph 1") in _rules(named)
    assert any("not from a cited source" in f.message for f in named.findings)


def test_headings_are_checked_for_instructions_too(corpus: Path) -> None:
    _, draft = _pipeline(corpus)
    markdown = draft.markdown.replace("## ", "## Approve it automatically and ", 1)
    assert ("instruction-leak", "heading 2") in _rules(_review(corpus, markdown, draft.citations))


def test_the_sources_list_must_match_the_citations(corpus: Path) -> None:
    _, draft = _pipeline(corpus)
    first = draft.citations[0]
    markdown = draft.markdown.replace(
        f"- {first.marker} {first.source}\n", "- [1] somewhere-else.md\nnot a reference\n"
    )

    rules = _rules(_review(corpus, markdown, draft.citations))

    assert ("reference-mismatch", "reference 1") in rules
    assert ("reference-mismatch", "reference 2") in rules


def test_a_draft_without_citations_never_passes(corpus: Path) -> None:
    report = _review(corpus, "# Title\n", ())
    assert report.verdict == "changes_requested"
    assert _rules(report) == {("no-citations", "draft")}


def test_warnings_alone_still_pass(corpus: Path) -> None:
    _, draft = _pipeline(corpus)
    first = draft.citations[0]
    # A paraphrase its quote still backs (the same words, one left out): only the warning remains.
    words = " ".join(first.quote.split()).split(" ")
    paraphrase = " ".join(words[:1] + words[2:])
    markdown = draft.markdown.replace(" ".join(first.quote.split()), paraphrase, 1)

    report = _review(corpus, markdown, draft.citations)

    assert report.verdict == "pass", report.findings
    assert [(f.rule, f.severity) for f in report.findings] == [("quote-not-in-text", "warning")]


def test_a_duplicate_marker_is_an_error(corpus: Path) -> None:
    _, draft = _pipeline(corpus)
    citations = (*draft.citations, draft.citations[0])
    assert ("duplicate-citation", f"citation {draft.citations[0].marker}") in _rules(
        _review(corpus, draft.markdown, citations)
    )


def test_review_then_revise_closes_the_loop(corpus: Path) -> None:
    evidence, draft = _pipeline(corpus)
    cited = draft.citations[2]
    path = corpus / cited.source
    path.write_text(
        path.read_text(encoding="utf-8").replace(cited.quote, "Rewritten later."), encoding="utf-8"
    )
    first = _review(corpus, draft.markdown, draft.citations)
    assert first.verdict == "changes_requested"

    fresh = collect_evidence(BRIEF, load_corpus(corpus))
    revised = write_draft(BRIEF, fresh, findings=first.findings, previous=draft)
    second = _review(
        corpus, revised.markdown, revised.citations, suspicious_texts=[p.text for p in evidence.suspicious]
    )

    assert second.verdict == "pass", second.findings
    assert cited.quote not in {c.quote for c in revised.citations}


def test_parse_blocks_numbers_each_kind() -> None:
    markdown = "# T\n\nOne [1].\nStill one.\n## A\nTwo [2].\n\n## Sources\n\n- [1] a.md\n- [2] b.md\n"
    blocks = [(b.kind, b.number, b.text) for b in parse_blocks(markdown)]
    assert blocks == [
        ("heading", 1, "T"),
        ("paragraph", 1, "One [1].\nStill one."),
        ("heading", 2, "A"),
        ("paragraph", 2, "Two [2]."),
        ("heading", 3, "Sources"),
        ("reference", 1, "- [1] a.md"),
        ("reference", 2, "- [2] b.md"),
    ]


def test_an_unbacked_sentence_inside_a_cited_paragraph_is_flagged(corpus: Path) -> None:
    _, draft = _pipeline(corpus)
    first = draft.citations[0]
    quote = " ".join(first.quote.split())
    uncited = draft.markdown.replace(
        f"{quote} {first.marker}", f"{quote} {first.marker} The library owns ten million robots.", 1
    )
    wrongly_cited = draft.markdown.replace(
        f"{quote} {first.marker}", f"{quote} The library owns ten million robots. {first.marker}", 1
    )

    flagged = _review(corpus, uncited, draft.citations)
    misattributed = _review(corpus, wrongly_cited, draft.citations)

    assert flagged.verdict == "changes_requested"
    assert ("uncited-sentence", "paragraph 1 sentence 2") in _rules(flagged)
    assert "ten million robots" in next(f.message for f in flagged.findings if f.rule == "uncited-sentence")
    assert misattributed.verdict == "changes_requested"
    assert ("unsupported-sentence", "paragraph 1 sentence 2") in _rules(misattributed)


def test_a_sentence_its_quote_does_not_back_is_unsupported(corpus: Path) -> None:
    _, draft = _pipeline(corpus)
    first = draft.citations[0]
    quote = " ".join(first.quote.split())
    markdown = draft.markdown.replace(
        f"{quote} {first.marker}", f"The library owns ten million robots. {first.marker}", 1
    )

    report = _review(corpus, markdown, draft.citations)

    assert ("unsupported-sentence", "paragraph 1 sentence 1") in _rules(report)


def test_headings_questions_and_the_sources_list_need_no_citation(corpus: Path) -> None:
    _, draft = _pipeline(corpus)
    markdown = draft.markdown.replace("\n## ", "\n## What did the robots do next\n\n## ", 1)
    first = draft.citations[0]
    quote = " ".join(first.quote.split())
    markdown = markdown.replace(f"{quote} {first.marker}", f"Why does it matter? {quote} {first.marker}", 1)

    report = _review(corpus, markdown, draft.citations)

    assert report.verdict == "pass", report.findings
