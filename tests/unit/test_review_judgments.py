"""What a reviewer's reads and judgments add to a report: findings only, never a pass."""

from __future__ import annotations

import pytest

from orchestrator.core.errors import InvalidInput
from roles.artifacts import Citation, Finding, ReviewReport
from roles.judgments import Judgment, judgment_findings, read_findings, with_findings
from roles.reviewing import cited_sentences

pytestmark = pytest.mark.unit

A, B = "a" * 64, "b" * 64
CITATIONS = (
    Citation(marker="[1]", source="one.md", quote="One fact.", source_digest=A),
    Citation(marker="[2]", source="two.md", quote="Two facts.", source_digest=B),
    Citation(marker="[3]", source="one.md", quote="Third fact.", source_digest=A),
)
MARKDOWN = "# T\n\nOne fact here [1]. Two facts here [2].\n\nThird fact here [3].\n"


def test_a_source_read_at_another_digest_or_not_read_is_an_error() -> None:
    assert read_findings({"one.md": A, "two.md": B, "extra.md": A}, CITATIONS) == []
    found = read_findings({"one.md": B}, CITATIONS)
    assert [(f.rule, f.location) for f in found] == [
        ("reviewer-read-mismatch", "citation [1]"),
        ("reviewer-read-mismatch", "citation [2]"),
    ]
    assert "read another text of one.md" in found[0].message
    assert "did not read two.md" in found[1].message


def test_judgments_other_than_supported_are_errors_at_their_sentence() -> None:
    sentences = cited_sentences(MARKDOWN, CITATIONS)
    judgments = [
        Judgment(sentence=1, verdict="supported", reason="fine"),
        Judgment(sentence=2, verdict="contradicted", reason="the source says   the opposite"),
        Judgment(sentence=3, verdict="unsupported", reason=""),
    ]
    found = judgment_findings(judgments, sentences)
    assert [(f.rule, f.location, f.message) for f in found] == [
        ("reviewer-contradicted", "paragraph 1 sentence 2", "the source says the opposite"),
        ("reviewer-unsupported", "paragraph 2 sentence 1", "the reviewer judged it unsupported"),
    ]
    with pytest.raises(InvalidInput, match="judgment 2: the version has no cited sentence 9 \\(it has 3\\)"):
        judgment_findings([judgments[0], Judgment(sentence=9, verdict="supported", reason="")], sentences)


def test_added_findings_turn_a_pass_into_a_fail_never_the_other_way() -> None:
    passed = ReviewReport(verdict="pass", checked_citations=3, version_digest="v")
    assert with_findings(passed, []) is passed
    error = Finding(rule="reviewer-unsupported", location="paragraph 1 sentence 1", message="m")
    failed = with_findings(passed, [error])
    assert failed.verdict == "changes_requested" and failed.findings == (error,)
    floor = Finding(rule="negation-mismatch", location="paragraph 1 sentence 1", message="m")
    report = ReviewReport(
        verdict="changes_requested", findings=(floor,), checked_citations=3, version_digest="v"
    )
    warning = Finding(rule="x", location="draft", message="m", severity="warning")
    assert with_findings(report, [warning]).verdict == "changes_requested"
