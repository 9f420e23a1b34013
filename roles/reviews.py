"""One review of a version from its reviewers' reports.

Reviewers after the same role run in parallel, each recording its own report
(a `ReviewReport` artifact, the run's `result_digest`). The version row's
`review` is their merge, so the page, `show` and the approver read one report:
its verdict fails when any reviewer's does, its findings are everyone's, and
`reviewers` names each reviewer's own verdict, finding count and report. The
writer of a revision round gets the merge of the reports that failed as one
`review` artifact; with one such report that is the report itself, unchanged
(same digest, so the same draft key as before pipelines).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlmodel import Session

from roles.artifacts import ReviewReport
from roles.tools import load_artifact, store_artifact


def reports(session: Session, digests: Sequence[tuple[str, str]]) -> list[tuple[str, ReviewReport]]:
    """(role, report) for each (role, review digest), in the order given."""
    return [(role, ReviewReport.model_validate(load_artifact(session, digest))) for role, digest in digests]


def merged(found: Sequence[tuple[str, ReviewReport]]) -> ReviewReport:
    """The reports as one: failed if any failed, every distinct finding in order."""
    if len(found) == 1:
        return found[0][1]
    findings = tuple(dict.fromkeys(f for _, report in found for f in report.findings))
    failed = any(report.verdict != "pass" for _, report in found)
    return ReviewReport(
        verdict="changes_requested" if failed else "pass",
        findings=findings,
        checked_citations=max(report.checked_citations for _, report in found),
        version_digest=found[0][1].version_digest,
    )


def version_review(found: Sequence[tuple[str, ReviewReport]], digests: dict[str, str]) -> dict[str, Any]:
    """What the version row holds: the merged report and each reviewer's own verdict."""
    body = merged(found).model_dump(mode="json")
    body["reviewers"] = {
        role: {"verdict": report.verdict, "findings": len(report.findings), "review_digest": digests[role]}
        for role, report in found
    }
    return body


def store_merged(session: Session, saga_id: str, found: Sequence[tuple[str, ReviewReport]]) -> str:
    """The merged report as one `review` artifact (a writer's findings to answer); its digest."""
    return store_artifact(session, saga_id, "review", merged(found))


def error_rules(report: ReviewReport) -> list[str]:
    """The rules of the report's error findings, sorted, once each."""
    return sorted({f.rule for f in report.findings if f.severity == "error"})


__all__ = ["error_rules", "merged", "reports", "store_merged", "version_review"]
