"""Deterministic planners, one per role: no network, still one harness call
at a time (search, read, write). They read tool results as data only: what
a source says never changes what they propose next beyond which file to read.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from orchestrator.harness.provenance import DataEnvelope
from orchestrator.harness.spec import ToolCall


def _call(tool: str, **arguments: Any) -> ToolCall:
    return ToolCall(tool=tool, arguments=arguments, call_id=uuid.uuid4().hex)


class ResearchPlanner:
    """Search the corpus for the brief, then read the best sources (at most `reads`)."""

    def __init__(self, saga_id: str, reads: int = 3) -> None:
        self.saga_id = saga_id
        self.reads = reads
        self.evidence: dict[str, Any] | None = None

    def propose(self, transcript: Sequence[DataEnvelope]) -> ToolCall | None:
        if not transcript:
            return _call("corpus.search", saga_id=self.saga_id)
        first = transcript[0]
        if first.status not in ("ok", "replayed") or not isinstance(first.content, dict):
            return None
        self.evidence = first.content
        sources: list[str] = []
        for passage in self.evidence.get("passages", []):
            if passage["source"] not in sources:
                sources.append(passage["source"])
        done = len(transcript) - 1
        if done < min(self.reads, len(sources)):
            return _call("corpus.read", saga_id=self.saga_id, source=sources[done])
        return None


class WriterPlanner:
    """One `draft.write` for the evidence (and the findings to answer)."""

    def __init__(
        self, saga_id: str, evidence_digest: str, round: int, review_digest: str | None, note: str | None
    ):
        self.args = {"saga_id": saga_id, "evidence_digest": evidence_digest, "round": round}
        if review_digest:
            self.args["review_digest"] = review_digest
        if note:
            self.args["note"] = note
        self.result: dict[str, Any] | None = None

    def propose(self, transcript: Sequence[DataEnvelope]) -> ToolCall | None:
        if not transcript:
            return _call("draft.write", **self.args)
        last = transcript[-1]
        if last.status in ("ok", "replayed") and isinstance(last.content, dict):
            self.result = last.content
            return None
        # A failed draft fails the same way again (nothing to cite): stop, with the reason.
        return None


class ReviewPlanner:
    """Read every cited source from the corpus, then record the review."""

    def __init__(self, saga_id: str, version: int, version_digest: str, sources: list[str]) -> None:
        self.saga_id = saga_id
        self.version = version
        self.version_digest = version_digest
        self.sources = sources
        self.result: dict[str, Any] | None = None

    def propose(self, transcript: Sequence[DataEnvelope]) -> ToolCall | None:
        done = len(transcript)
        if done < len(self.sources):
            return _call("corpus.read", saga_id=self.saga_id, source=self.sources[done])
        if done == len(self.sources):
            return _call(
                "review.record",
                saga_id=self.saga_id,
                version=self.version,
                version_digest=self.version_digest,
            )
        last = transcript[-1]
        if last.status in ("ok", "replayed") and isinstance(last.content, dict):
            self.result = last.content
        return None


__all__ = ["ResearchPlanner", "ReviewPlanner", "WriterPlanner"]
