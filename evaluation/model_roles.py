"""The scripted model's role behaviours: a faithful researcher, writer and reviewer, and a
writer that invents a citation (no I/O here).

A faithful role never writes a word its sources do not back:

- researcher: `corpus_search` with the brief, `corpus_read` of the first two
  distinct sources the search ranked, then `evidence_record` with up to
  `QUOTES_PER_SOURCE` whole sentences of each text read (byte-exact slices of
  what `corpus_read` returned, at that answer's `source_digest`) that share a
  content word with the brief and do not read as instructions;
- writer: one `draft_write` whose markdown has one sentence of its own per note
  ("From <source name>: <the quote, verbatim> [n]") and whose citations carry
  the notes unchanged; after any answer to it (even an error) it stops;
- reviewer: `corpus_read` of each cited source once, then `review_record` with
  every sentence `supported` and `read` mapping each source to the digest its
  read returned.

A read answer the planner cut short is quoted only from what it kept whole
(`evaluation.model_conversation.field`): a sentence the cut may have
shortened is never quoted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import PurePosixPath
from random import Random
from typing import Any, Final, Literal

from evaluation.model_conversation import Call, Conversation, Reply, Step, done, field, values
from roles.corpus import sentence_spans
from roles.injection import assess
from roles.ranking import STOPWORDS, fold
from roles.reviewing import SOURCES_HEADING
from roles.writing import title_from_brief

SOURCES_READ: Final = 2
QUOTES_PER_SOURCE: Final = 3
QUOTE_CHARS: Final = (20, 400)  # a quotable sentence's shortest and longest length
INVENTED_QUOTES: Final = (
    "The founders buried a chest of gold coins beneath the main entrance in 1642.",
    "Every visitor was once given a free horse on arrival.",
    "For one summer the whole building was moved to the far side of the moon.",
)
INVENTED_SOURCE: Final = "archive/unpublished-memoir.md"
_WORD = re.compile(r"[^\W_]+")
_NAME_WORD = re.compile(r"[^\W\d_]+")
_NOT_PROSE = ("#", "```", "|", ">")  # block starts that are headings, code, tables or quotes
_MARKUP = re.compile(r"[\[\]`|]|\n\s*\n")


def faithful(conv: Conversation) -> Reply:
    """The next step of a faithful model in this role (other kinds have nothing to do)."""
    if conv.role == "researcher":
        return _research(conv)
    if conv.role == "writer":
        return _write(conv)
    if conv.role == "reviewer":
        return _review(conv)
    return done(f"There is nothing for a {conv.role} role to do.")


# -- researcher ------------------------------------------------------------------------------


def _research(conv: Conversation) -> Reply:
    if conv.calls("evidence_record"):
        return done("The evidence is recorded.")
    searches = conv.calls("corpus_search")
    if not searches:
        return Reply(call=Call.of("corpus_search", saga_id=conv.saga_id, query=conv.brief))
    asked = {step.arg("source") for step in conv.calls("corpus_read")}
    for source in top_sources(searches[-1].content, SOURCES_READ):
        if source not in asked:
            return Reply(call=Call.of("corpus_read", saga_id=conv.saga_id, source=source))
    notes = [note for step in conv.calls("corpus_read") if step.ok for note in notes_from(step, conv.brief)]
    if not notes:
        return done("No sentence of the sources read bears on the brief.")
    return Reply(call=Call.of("evidence_record", saga_id=conv.saga_id, round=0, notes=notes))


def top_sources(content: Any, count: int) -> list[str]:
    """The first `count` distinct sources of a search answer's passages, best first."""
    names: list[Any] = values(content, "source")  # of a cut answer; a whole one has passages
    if isinstance(content, Mapping) and isinstance(content.get("passages"), list):
        names = [p.get("source") for p in content["passages"] if isinstance(p, Mapping)]
    found: list[str] = []
    for name in names:
        if isinstance(name, str) and name and name not in found:
            found.append(name)
    return found[:count]


def notes_from(step: Step, brief: str) -> list[dict[str, str]]:
    """Up to `QUOTES_PER_SOURCE` notes from one `corpus_read` answer: whole sentences of the text
    it returned that share a content word with the brief and do not read as instructions."""
    text, whole = field(step.content, "text")
    digest, digest_whole = field(step.content, "source_digest")
    source = field(step.content, "source")[0] or step.arg("source")
    if not text or not digest or not digest_whole or not isinstance(source, str):
        return []
    wanted = content_words(brief)
    quotes = [q for q in sentences(text, whole=whole) if wanted & content_words(q) and not assess(q, brief)]
    return [{"source": source, "source_digest": digest, "quote": q} for q in quotes[:QUOTES_PER_SOURCE]]


def sentences(text: str, *, whole: bool = True) -> list[str]:
    """The quotable sentences of a text, each a slice of it: prose only (no heading, code, table
    or marker), of a sentence's shape and length; when the text was cut, not its last one."""
    found: list[str] = []
    for start, end in _prose_blocks(text):
        for s, e in sentence_spans(text, start, end):
            quote = text[s:e]
            if (whole or e < len(text.rstrip())) and _quotable(quote):
                found.append(quote)
    return found


def _prose_blocks(text: str) -> Iterator[tuple[int, int]]:
    """Spans of consecutive non-blank lines that are not headings, code, tables or block quotes."""
    start: int | None = None
    offset = 0
    for line in text.split("\n"):
        prose = bool(line.strip()) and not line.lstrip().startswith(_NOT_PROSE)
        if prose and start is None:
            start = offset
        elif not prose and start is not None:
            yield start, offset
            start = None
        offset += len(line) + 1
    if start is not None:
        yield start, len(text)


def _quotable(quote: str) -> bool:
    shortest, longest = QUOTE_CHARS
    first, last = quote[:1], quote.rstrip("\"'\u201d)")[-1:]
    opens = first.isupper() or first.isdigit() or first in '"\u201c'
    return shortest <= len(quote) <= longest and opens and last in ".!?" and not _MARKUP.search(quote)


def content_words(text: str) -> set[str]:
    """Folded words of a text that are not stopwords or single letters."""
    return {w for w in _WORD.findall(fold(text)) if w not in STOPWORDS and len(w) > 1}


# -- writer ----------------------------------------------------------------------------------


def _write(conv: Conversation) -> Reply:
    drafts = conv.calls("draft_write")
    if drafts:
        # Its citations were exact: an error is not something it could fix, so it stops.
        return done("The draft is written." if drafts[-1].ok else "The draft stands as written.")
    arguments = draft_arguments(conv)
    if arguments is None:
        return done("There are no notes to write from.")
    return Reply(call=Call.of("draft_write", **arguments))


def hallucinating_writer(conv: Conversation, *, invent: Literal["quote", "source"]) -> Reply:
    """A writer that cites one note wrongly (an invented quote, or a source that does not exist;
    which note and which invention drawn from the seed) and sends the same call again whenever
    it is told it is wrong (made afresh: the planner may have cut the echoed arguments)."""
    drafts = conv.calls("draft_write")
    if drafts and drafts[-1].ok:
        return done("The draft is written.")
    notes = goal_notes(conv.goal)
    if not notes:
        return done("There are no notes to write from.")
    rng = Random(conv.seed)
    index = rng.randrange(len(notes))
    wrong = dict(notes[index])
    if invent == "quote":
        wrong["quote"] = rng.choice(INVENTED_QUOTES)
    else:
        wrong["source"] = INVENTED_SOURCE
    notes[index] = wrong
    return Reply(call=Call.of("draft_write", **(draft_arguments(conv, notes) or {})))


def goal_notes(goal: Mapping[str, Any]) -> list[dict[str, str]]:
    """The goal's notes that name a source, a digest and a quote, each once."""
    notes: list[dict[str, str]] = []
    for note in goal.get("notes") or ():
        if not isinstance(note, Mapping):
            continue
        picked = {key: note.get(key) for key in ("source", "source_digest", "quote")}
        if all(isinstance(v, str) and v for v in picked.values()) and picked not in notes:
            notes.append({k: str(v) for k, v in picked.items()})
    return notes


def draft_arguments(conv: Conversation, notes: list[dict[str, str]] | None = None) -> dict[str, Any] | None:
    """`draft_write` arguments from the notes (the goal's by default); None without notes."""
    notes = goal_notes(conv.goal) if notes is None else notes
    if not notes:
        return None
    numbered = _integer_markers(conv.tools.get("draft_write", {}))
    title = title_from_brief(conv.brief)
    prose = " ".join(f"From {_name(n['source'])}: {n['quote']} [{i}]" for i, n in enumerate(notes, 1))
    listed = [f"- [{i}] {n['source']}" for i, n in enumerate(notes, 1)]
    markdown = "\n".join([f"# {title}", "", prose, "", f"## {SOURCES_HEADING}", "", *listed]) + "\n"
    citations = [{"marker": i if numbered else f"[{i}]", **n} for i, n in enumerate(notes, 1)]
    arguments: dict[str, Any] = {
        "saga_id": conv.saga_id,
        "evidence_digest": conv.goal.get("evidence_digest"),
        "round": conv.goal.get("round") or 0,
        "title": title,
        "markdown": markdown,
        "citations": citations,
    }
    for key in ("review_digest", "note"):
        if conv.goal.get(key):
            arguments[key] = conv.goal[key]
    return arguments


def _name(source: str) -> str:
    """A source's file name as words ("riverside-branch.md" -> "riverside branch"); no digits,
    so the sentence states no number its quote does not."""
    return " ".join(_NAME_WORD.findall(PurePosixPath(source).stem)) or "the source"


def _integer_markers(schema: Mapping[str, Any]) -> bool:
    """Whether the offered `draft_write` schema wants `marker` as a number (else "[n]")."""
    citations = _resolve(schema, schema.get("properties", {}).get("citations", {}))
    item = _resolve(schema, citations.get("items", {}))
    marker = _resolve(schema, item.get("properties", {}).get("marker", {}))
    kinds = [marker.get("type"), *(o.get("type") for o in marker.get("anyOf", ()) if isinstance(o, Mapping))]
    return "integer" in kinds


def _resolve(schema: Mapping[str, Any], node: Any) -> Mapping[str, Any]:
    if not isinstance(node, Mapping):
        return {}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        found = schema.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
        return found if isinstance(found, Mapping) else {}
    return node


# -- reviewer --------------------------------------------------------------------------------


def _review(conv: Conversation) -> Reply:
    if conv.calls("review_record"):
        return done("The review is recorded.")
    asked = {step.arg("source") for step in conv.calls("corpus_read")}
    for source in cited_sources(conv.goal):
        if source not in asked:
            return Reply(call=Call.of("corpus_read", saga_id=conv.saga_id, source=source))
    read: dict[str, str] = {}
    for step in conv.calls("corpus_read"):
        digest, whole = field(step.content, "source_digest")
        if step.ok and digest and whole and isinstance(step.arg("source"), str):
            read[step.arg("source")] = digest
    return Reply(call=Call.of("review_record", **review_arguments(conv, read)))


def cited_sources(goal: Mapping[str, Any]) -> list[str]:
    """Each source the version's sentences cite, once, in the order first cited."""
    found: list[str] = []
    for sentence in goal.get("sentences") or ():
        for citation in (sentence.get("citations") or ()) if isinstance(sentence, Mapping) else ():
            source = citation.get("source") if isinstance(citation, Mapping) else None
            if isinstance(source, str) and source and source not in found:
                found.append(source)
    return found


def review_arguments(conv: Conversation, read: Mapping[str, str]) -> dict[str, Any]:
    """`review_record` arguments judging every sentence of the goal supported."""
    judgments = [
        {"sentence": s["index"], "verdict": "supported", "reason": "The cited quote states it."}
        for s in conv.goal.get("sentences") or ()
        if isinstance(s, Mapping) and isinstance(s.get("index"), int)
    ]
    return {
        "saga_id": conv.saga_id,
        "version": conv.goal.get("version"),
        "version_digest": conv.goal.get("version_digest"),
        "read": dict(read),
        "judgments": judgments,
    }


__all__ = [
    "INVENTED_QUOTES",
    "INVENTED_SOURCE",
    "cited_sources",
    "content_words",
    "draft_arguments",
    "faithful",
    "goal_notes",
    "hallucinating_writer",
    "notes_from",
    "review_arguments",
    "sentences",
    "top_sources",
]
