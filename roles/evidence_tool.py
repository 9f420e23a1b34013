"""`evidence.record`: the researcher's notes, checked against the saga's corpus, as evidence.

A note is a quote the researcher read: its source, the digest of the text it
read, and the quote, byte for byte. Each note is checked against the source as
the corpus holds it now (through the same reader the other role tools use);
the first note that fails refuses the whole call with one line naming it, so
a model can correct it and call again. What is kept is an `Evidence` whose
passages are the notes located in their sources (the first occurrence), in
the order given.

The injection screen is the one the search applies (`roles.ranking`): a note
that reads as instructions or carries a destination the brief does not name,
or that overlaps a passage the screen set aside (every passage of a file that
tries to instruct the agent), is kept under `suspicious` with the reasons,
never among the passages to quote. The screen's other suspicious passages are
kept too, as the search returns them, for the reviewer's leak check.

`build_evidence` does no I/O of its own: it reads through the `read` it is given.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.core.errors import InvalidInput, NotFound
from roles.artifacts import SHA256_HEX, Evidence, Passage, SourceFile
from roles.corpus import MAX_PASSAGE_CHARS
from roles.injection import assess

MAX_NOTES: Final = 40
MAX_ROUND: Final = 50


class Note(BaseModel):
    """One quote the researcher read, with the digest of the text it read it in."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    source: str = Field(min_length=1, max_length=1024)
    source_digest: str = Field(pattern=SHA256_HEX)
    quote: str = Field(min_length=1, max_length=MAX_PASSAGE_CHARS)


class EvidenceArgs(BaseModel):
    """Record the researcher's notes as the saga's evidence."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    saga_id: str = Field(min_length=1, max_length=64)
    round: int = Field(default=0, ge=0, le=MAX_ROUND)
    notes: list[Note] = Field(min_length=1, max_length=MAX_NOTES)


def notes_digest(notes: Sequence[Note]) -> str:
    """sha256 of the notes' canonical JSON: the same notes, the same key."""
    body = json.dumps(
        [n.model_dump(mode="json") for n in notes], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def evidence_key(args: EvidenceArgs) -> str:
    return f"evidence-{args.saga_id}-{args.round}-{notes_digest(args.notes)[:16]}"


def build_evidence(
    notes: Sequence[Note], *, brief: str, read: Callable[[str], SourceFile], screen: Evidence
) -> Evidence:
    """The notes as evidence; `InvalidInput` names the first note that is not in its source.

    `screen` is the search's evidence for the brief (its `suspicious`, `skipped`
    and `files_read` are kept; its passages are not).
    """
    files: dict[str, SourceFile | str] = {}
    passages: list[Passage] = []
    flagged: list[Passage] = []
    seen: set[tuple[str, int, int]] = set()
    for n, note in enumerate(notes, start=1):
        if note.source not in files:
            files[note.source] = _open(read, note.source)
        found = files[note.source]
        if isinstance(found, str):
            raise InvalidInput(f"note {n}: no source {note.source!r} in the saga's corpus ({found})")
        passage = _locate(n, note, found)
        if (passage.source, passage.start, passage.end) in seen:
            continue
        seen.add((passage.source, passage.start, passage.end))
        reasons = _reasons(passage, brief, screen)
        if reasons:
            flagged.append(passage.model_copy(update={"suspicious": True, "reasons": tuple(reasons)}))
        else:
            passages.append(passage)
    held = {(p.source, p.start, p.end) for p in screen.suspicious}
    return Evidence(
        brief=brief,
        passages=tuple(passages),
        suspicious=(*screen.suspicious, *(p for p in flagged if (p.source, p.start, p.end) not in held)),
        skipped=screen.skipped,
        files_read=screen.files_read,
    )


def _open(read: Callable[[str], SourceFile], source: str) -> SourceFile | str:
    """The source as the corpus holds it, or why it cannot be read (outside, missing, unusable)."""
    try:
        return read(source)
    except (InvalidInput, NotFound) as error:
        return str(error)


def _locate(n: int, note: Note, file: SourceFile) -> Passage:
    if file.digest != note.source_digest:
        raise InvalidInput(
            f"note {n}: {note.source} has changed since digest {note.source_digest[:6]}… "
            f"(it is at {file.digest[:6]}… now)"
        )
    if not note.quote.strip():
        raise InvalidInput(f"note {n}: the quote is blank")
    start = file.text.find(note.quote)
    if start < 0:
        raise InvalidInput(f"note {n}: the quote is not in {note.source} at digest {note.source_digest[:6]}…")
    end = start + len(note.quote)
    return Passage(source=note.source, source_digest=file.digest, start=start, end=end, text=note.quote)


def _reasons(passage: Passage, brief: str, screen: Evidence) -> list[str]:
    """The screen's reasons against a note: its own text's, and those of every passage it
    overlaps that the screen set aside."""
    reasons = assess(passage.text, brief)
    for held in screen.suspicious:
        overlaps = held.start < passage.end and passage.start < held.end
        if held.source == passage.source and held.source_digest == passage.source_digest and overlaps:
            reasons += [r for r in held.reasons if r not in reasons]
    return reasons


__all__ = ["MAX_NOTES", "EvidenceArgs", "Note", "build_evidence", "evidence_key", "notes_digest"]
