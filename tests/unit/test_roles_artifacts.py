"""Role artifacts: frozen, validated, and digested over canonical JSON."""

from __future__ import annotations

import hashlib
import json

import pytest
from pydantic import ValidationError

from roles.artifacts import (
    Citation,
    Draft,
    Evidence,
    Finding,
    Passage,
    ReviewReport,
    SourceFile,
    artifact_digest,
    canonical_json,
)

pytestmark = pytest.mark.unit

DIGEST = hashlib.sha256(b"text").hexdigest()


def _citation(marker: str = "[1]") -> Citation:
    return Citation(marker=marker, source="a.md", quote="A quote.", source_digest=DIGEST)


def test_digest_is_sha256_of_sorted_compact_json() -> None:
    draft = Draft(title="Tïtle", markdown="# Tïtle\n", citations=(_citation(),))
    expected = json.dumps(
        draft.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )

    assert canonical_json(draft) == expected
    assert draft.digest() == artifact_digest(draft) == hashlib.sha256(expected.encode()).hexdigest()
    assert Draft.model_validate_json(draft.model_dump_json()).digest() == draft.digest()


def test_digest_changes_with_any_field() -> None:
    draft = Draft(title="T", markdown="# T\n", citations=(_citation(),))
    assert draft.model_copy(update={"markdown": "# T2\n"}).digest() != draft.digest()


def test_artifacts_are_frozen_and_reject_unknown_fields() -> None:
    citation = _citation()
    with pytest.raises(ValidationError):
        citation.quote = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Citation.model_validate({**citation.model_dump(), "extra": 1})


def test_citation_json_matches_the_show_contract() -> None:
    assert set(_citation().model_dump()) == {"marker", "source", "quote", "source_digest"}


@pytest.mark.parametrize(
    "bad",
    [{"marker": "1"}, {"marker": "[0]"}, {"quote": ""}, {"source_digest": "abc"}],
)
def test_citation_fields_are_validated(bad: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        Citation.model_validate({**_citation().model_dump(), **bad})


def test_passage_offsets_must_span_its_text() -> None:
    Passage(source="a.md", source_digest=DIGEST, start=3, end=7, text="abcd")
    with pytest.raises(ValidationError, match="offsets"):
        Passage(source="a.md", source_digest=DIGEST, start=3, end=9, text="abcd")


def test_review_verdict_must_follow_the_findings() -> None:
    error = Finding(rule="quote-not-verbatim", location="citation [1]", message="m")
    warning = Finding(rule="quote-not-in-text", location="citation [1]", message="m", severity="warning")
    ReviewReport(verdict="pass", findings=(warning,), checked_citations=1, version_digest="d")
    ReviewReport(verdict="changes_requested", findings=(error,), checked_citations=1, version_digest="d")
    with pytest.raises(ValidationError):
        ReviewReport(verdict="pass", findings=(error,), checked_citations=1, version_digest="d")
    with pytest.raises(ValidationError):
        ReviewReport(
            verdict="changes_requested", findings=(warning,), checked_citations=1, version_digest="d"
        )


def test_evidence_and_source_file_round_trip() -> None:
    passage = Passage(source="a.md", source_digest=DIGEST, start=0, end=4, text="text", score=1.5)
    evidence = Evidence(brief="b", passages=(passage,), files_read=1)
    assert Evidence.model_validate_json(evidence.model_dump_json()) == evidence
    source = SourceFile(path="a.md", digest=DIGEST, text="text")
    assert source.digest == DIGEST
