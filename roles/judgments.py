"""What a reviewer's reads and judgments add to the floor's report.

`review.record` runs the deterministic checks first (`roles.reviewing.review`,
with its own reads); then:

- ``reviewer-read-mismatch``: a cited source whose digest in the reviewer's
  `read` map is not the digest the citation names (the reviewer read another
  text than the version cites), or that the reviewer did not read at all;
- ``reviewer-unsupported`` / ``reviewer-contradicted``: a judgment that is not
  ``supported``, located at the judged sentence, its reason as the message.

Findings are only ever added: a ``supported`` judgment adds nothing, so it can
never turn a floor finding into a pass. The verdict is ``changes_requested``
as soon as any finding is an error.

No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.core.errors import InvalidInput
from roles.artifacts import SHA256_HEX, Citation, Finding, ReviewReport
from roles.reviewing import CitedSentence

READ_MISMATCH: Final = "reviewer-read-mismatch"
UNSUPPORTED: Final = "reviewer-unsupported"
CONTRADICTED: Final = "reviewer-contradicted"
REVIEWER_RULES: Final = frozenset({READ_MISMATCH, UNSUPPORTED, CONTRADICTED})
Verdict = Literal["supported", "unsupported", "contradicted"]


class Judgment(BaseModel):
    """A reviewer's verdict on one cited sentence (numbered as `cited_sentences` numbers them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    sentence: int = Field(ge=1, le=10_000)
    verdict: Verdict
    reason: str = Field(max_length=300)


class ReviewArgs(BaseModel):
    """Review one version against the original sources and record the report: the
    deterministic checks first, then what the reviewer read (source: the digest its
    `corpus.read` returned) and its judgment of each cited sentence, by number."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    saga_id: str = Field(min_length=1, max_length=64)
    version: int = Field(ge=1)
    version_digest: str = Field(pattern=SHA256_HEX)
    read: (
        dict[Annotated[str, Field(min_length=1, max_length=1024)], Annotated[str, Field(pattern=SHA256_HEX)]]
        | None
    ) = Field(default=None, max_length=200)
    judgments: list[Judgment] | None = Field(default=None, max_length=500)


def read_findings(read: Mapping[str, str], citations: Sequence[Citation]) -> list[Finding]:
    """One error per cited source the reviewer did not read at the digest the version cites."""
    findings: list[Finding] = []
    seen: set[str] = set()
    for citation in citations:
        if citation.source in seen:
            continue
        seen.add(citation.source)
        digest = read.get(citation.source)
        if digest == citation.source_digest:
            continue
        if digest is None:
            message = f"the reviewer did not read {citation.source}"
        else:
            message = (
                f"the reviewer read another text of {citation.source} than the version cites "
                f"(read {digest[:12]}…, cited {citation.source_digest[:12]}…)"
            )
        findings.append(_error(READ_MISMATCH, f"citation {citation.marker}", message))
    return findings


def judgment_findings(judgments: Sequence[Judgment], sentences: Sequence[CitedSentence]) -> list[Finding]:
    """One error per judgment that is not ``supported``; `InvalidInput` names the first
    judgment of a sentence the version does not have."""
    by_index = {s.index: s for s in sentences}
    findings: list[Finding] = []
    for n, judgment in enumerate(judgments, start=1):
        sentence = by_index.get(judgment.sentence)
        if sentence is None:
            raise InvalidInput(
                f"judgment {n}: the version has no cited sentence {judgment.sentence} "
                f"(it has {len(sentences)})"
            )
        if judgment.verdict == "supported":
            continue
        rule = CONTRADICTED if judgment.verdict == "contradicted" else UNSUPPORTED
        reason = " ".join(judgment.reason.split()) or f"the reviewer judged it {judgment.verdict}"
        findings.append(_error(rule, sentence.location, reason))
    return findings


def with_findings(report: ReviewReport, added: Sequence[Finding]) -> ReviewReport:
    """`report` with `added` after its own findings, its verdict following them all."""
    if not added:
        return report
    findings = (*report.findings, *added)
    failed = any(f.severity == "error" for f in findings)
    return ReviewReport(
        verdict="changes_requested" if failed else "pass",
        findings=findings,
        checked_citations=report.checked_citations,
        version_digest=report.version_digest,
    )


def _error(rule: str, location: str, message: str) -> Finding:
    return Finding(rule=rule, location=location, message=message, severity="error")


__all__ = [
    "CONTRADICTED",
    "READ_MISMATCH",
    "REVIEWER_RULES",
    "UNSUPPORTED",
    "Judgment",
    "ReviewArgs",
    "Verdict",
    "judgment_findings",
    "read_findings",
    "with_findings",
]
