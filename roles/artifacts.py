"""Role artifacts: the typed values the researcher, writer and reviewer hand on.

Every artifact is a frozen pydantic model whose sequences are tuples, so a value
cannot change after it was digested. `artifact_digest()` (and each model's
`digest()`) is the sha256 of the model's canonical JSON: keys sorted, no
whitespace, UTF-8. The JSON field names match the `show --json` contract in
DESIGN.md (`citations`: `marker`, `source`, `quote`, `source_digest`; `review`:
`verdict`, `findings`).

No I/O here.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

SHA256_HEX = r"^[0-9a-f]{64}$"
MARKER = r"^\[[1-9][0-9]*\]$"


def canonical_json(model: BaseModel) -> str:
    """The one serialisation that digests are taken over."""
    return json.dumps(
        model.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def artifact_digest(model: BaseModel) -> str:
    """sha256 hex of the model's canonical JSON."""
    return hashlib.sha256(canonical_json(model).encode("utf-8")).hexdigest()


class Artifact(BaseModel):
    """Base of every role artifact: frozen, no unknown fields, digestible."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def digest(self) -> str:
        return artifact_digest(self)


class SourceFile(BaseModel):
    """One corpus file that was read: its path relative to the corpus root (POSIX
    spelling), the sha256 hex of its bytes, and its decoded text.

    Not an `Artifact` (its `digest` field is the file's digest, not the model's).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    digest: str = Field(pattern=SHA256_HEX)
    text: str


class SkippedFile(Artifact):
    """A corpus file that was not read, and why (binary, too large, not UTF-8 ...)."""

    path: str
    reason: str


class Passage(Artifact):
    """A verbatim slice of one source: `text == source_text[start:end]`."""

    source: str
    source_digest: str = Field(pattern=SHA256_HEX)
    start: int = Field(ge=0)
    end: int = Field(ge=0)
    text: str
    score: float = 0.0
    suspicious: bool = False
    reasons: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _offsets_match_text(self) -> Self:
        if self.end - self.start != len(self.text):
            raise ValueError("passage offsets do not span its text")
        return self


class Evidence(Artifact):
    """What the researcher found for a brief.

    `passages` are the usable ones, best first; `suspicious` holds passages that
    read as instructions or carry foreign destinations (never to be quoted);
    `skipped` lists files that could not be read; `files_read` counts the rest.
    """

    brief: str
    passages: tuple[Passage, ...] = ()
    suspicious: tuple[Passage, ...] = ()
    skipped: tuple[SkippedFile, ...] = ()
    files_read: int = Field(default=0, ge=0)


class Citation(Artifact):
    """A marker in the draft and the verbatim quote from the source it stands for."""

    marker: str = Field(pattern=MARKER)
    source: str
    quote: str = Field(min_length=1)
    source_digest: str = Field(pattern=SHA256_HEX)


class Draft(Artifact):
    """One written version: a title, its markdown and its citations."""

    title: str
    markdown: str
    citations: tuple[Citation, ...]


class Finding(Artifact):
    """One reviewer remark: which rule, where (`paragraph 2`, `citation [3]`), why."""

    rule: str
    location: str
    message: str
    severity: Literal["error", "warning"] = "error"


class ReviewReport(Artifact):
    """The reviewer's verdict on one version, bound to that version's digest."""

    verdict: Literal["pass", "changes_requested"]
    findings: tuple[Finding, ...] = ()
    checked_citations: int = Field(ge=0)
    version_digest: str

    @model_validator(mode="after")
    def _verdict_follows_findings(self) -> Self:
        has_error = any(f.severity == "error" for f in self.findings)
        if (self.verdict == "pass") == has_error:
            raise ValueError("verdict must be 'pass' exactly when there is no error finding")
        return self
