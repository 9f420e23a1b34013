"""Deterministic planners, one per role: no network, still one harness call
at a time (search, read, write). They read tool results as data only: what
a source says never changes what they propose next beyond which file to read.

What the researcher records and what the reviewer judges come from the texts
their own `corpus.read` calls returned, never from elsewhere: a read that
returns another text changes the evidence and the review.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from orchestrator.harness.provenance import DataEnvelope
from orchestrator.harness.spec import ToolCall
from roles.corpus import MAX_PASSAGE_CHARS
from roles.evidence_tool import MAX_NOTES
from roles.reviewing import CitedSentence
from roles.sentences import supports

DONE: Final = ("ok", "replayed")


def _call(tool: str, **arguments: Any) -> ToolCall:
    return ToolCall(tool=tool, arguments=arguments, call_id=uuid.uuid4().hex)


def _answered(envelope: DataEnvelope) -> bool:
    return envelope.status in DONE and isinstance(envelope.content, dict)


def _of(transcript: Sequence[DataEnvelope], tool: str) -> list[DataEnvelope]:
    return [e for e in transcript if e.provenance.tool == tool]


def texts_read(sources: Sequence[str], reads: Sequence[DataEnvelope]) -> dict[str, tuple[str, str]]:
    """source -> (digest, text) for each read that answered, paired with the source it asked for."""
    found: dict[str, tuple[str, str]] = {}
    for source, envelope in zip(sources, reads, strict=False):
        content = envelope.content
        if _answered(envelope) and isinstance(content.get("text"), str):
            digest = content.get("source_digest")
            if isinstance(digest, str):
                found[source] = (digest, content["text"])
    return found


class ResearchPlanner:
    """Search the corpus for the brief, read the best sources (at most `reads`), then record
    as evidence the passages found verbatim in what those reads returned."""

    def __init__(self, saga_id: str, reads: int = 3, *, round: int = 0) -> None:
        self.saga_id = saga_id
        self.reads = reads
        self.round = round
        self.evidence: dict[str, Any] | None = None

    def propose(self, transcript: Sequence[DataEnvelope]) -> ToolCall | None:
        if not transcript:
            return _call("corpus.search", saga_id=self.saga_id)
        first = transcript[0]
        if not _answered(first):
            return None
        found: dict[str, Any] = first.content
        passages = [p for p in found.get("passages", []) if isinstance(p, dict)]
        sources = list(dict.fromkeys(str(p.get("source")) for p in passages))[: self.reads]
        reads = _of(transcript, "corpus.read")
        if len(reads) < len(sources):
            return _call("corpus.read", saga_id=self.saga_id, source=sources[len(reads)])
        recorded = _of(transcript, "evidence.record")
        if recorded:
            if _answered(recorded[-1]) and isinstance(recorded[-1].content.get("evidence"), dict):
                self.evidence = recorded[-1].content["evidence"]
            return None
        notes = research_notes(passages, texts_read(sources, reads))
        if not notes:
            if not sources:
                self.evidence = found  # nothing matched the brief: the handler says why
            return None
        return _call("evidence.record", saga_id=self.saga_id, round=self.round, notes=notes)


def research_notes(
    passages: Sequence[Mapping[str, Any]], texts: Mapping[str, tuple[str, str]]
) -> list[dict[str, str]]:
    """A note for each search passage whose text is verbatim in what its source's read returned,
    with that read's digest; the others are left out."""
    notes: list[dict[str, str]] = []
    for passage in passages:
        quote, source = passage.get("text"), passage.get("source")
        if not isinstance(quote, str) or not isinstance(source, str) or source not in texts:
            continue
        digest, text = texts[source]
        if quote.strip() and len(quote) <= MAX_PASSAGE_CHARS and quote in text:
            notes.append({"source": source, "source_digest": digest, "quote": quote})
    return notes[:MAX_NOTES]


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
    """Read every cited source from the corpus, judge each cited sentence (`sentences`, see
    `roles.reviewing.cited_sentences`) against the text its read returned, then record the
    review with the digests read and the judgments."""

    def __init__(
        self,
        saga_id: str,
        version: int,
        version_digest: str,
        sources: list[str],
        *,
        sentences: Sequence[CitedSentence] = (),
    ) -> None:
        self.saga_id = saga_id
        self.version = version
        self.version_digest = version_digest
        self.sources = sources
        self.sentences = tuple(sentences)
        self.result: dict[str, Any] | None = None

    def propose(self, transcript: Sequence[DataEnvelope]) -> ToolCall | None:
        reads = _of(transcript, "corpus.read")
        if len(reads) < len(self.sources):
            return _call("corpus.read", saga_id=self.saga_id, source=self.sources[len(reads)])
        recorded = _of(transcript, "review.record")
        if not recorded:
            texts = texts_read(self.sources, reads)
            arguments: dict[str, Any] = {"read": {source: digest for source, (digest, _) in texts.items()}}
            if self.sentences:
                arguments["judgments"] = [judge(s, texts) for s in self.sentences]
            return _call(
                "review.record",
                saga_id=self.saga_id,
                version=self.version,
                version_digest=self.version_digest,
                **arguments,
            )
        if _answered(recorded[-1]):
            self.result = recorded[-1].content
        return None


def judge(sentence: CitedSentence, texts: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """A sentence is supported when each of its quotes is in the text read from its source
    and the quotes back it (`roles.sentences.supports`); unsupported otherwise."""
    for citation in sentence.citations:
        read = texts.get(citation.source)
        if read is None:
            return _judgment(sentence, "unsupported", f"{citation.source} could not be read")
        if citation.quote not in read[1]:
            return _judgment(
                sentence,
                "unsupported",
                f"the quote of {citation.marker} is not in the text read from {citation.source}",
            )
    if not supports([c.quote for c in sentence.citations], sentence.text):
        named = ", ".join(c.marker for c in sentence.citations)
        return _judgment(sentence, "unsupported", f"the quote of {named} does not back the sentence")
    return _judgment(sentence, "supported", "its quotes are in the texts read and back it")


def _judgment(sentence: CitedSentence, verdict: str, reason: str) -> dict[str, Any]:
    return {"sentence": sentence.index, "verdict": verdict, "reason": reason[:300]}


__all__ = ["ResearchPlanner", "ReviewPlanner", "WriterPlanner", "judge", "research_notes", "texts_read"]
