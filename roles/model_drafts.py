"""A writer model's own draft, checked before it is stored (`draft.write` given `markdown`).

A model may write its own sentences, but what it states must be cited, and
every citation must quote its source exactly. `checked_draft()` checks, in
this order, and refuses the whole draft with one line naming the first
problem (`InvalidInput`); the harness sends that line back to the model as
the tool's error, so it can correct the draft and call again:

1. size: the title is one line, the markdown at most `MAX_MARKDOWN_CHARS`
   (the tool's schema holds the same bounds), and there is a citation;
2. links: no link, image or URL in the title or the markdown to a host
   outside `link_hosts` (`orchestrator.harness.links`);
3. markers: no marker is cited twice; every marker written (body, headings,
   the Sources list) has a citation, and every citation is carried by a body
   paragraph; every body sentence that states something carries a marker,
   unless it stands word for word in the quote of a marker of its paragraph
   (a quote of several sentences carries its marker after the last one, as
   the reviewer and the quoted-text view read it);
4. citations: the source is one the evidence quotes from, at the digest the
   evidence holds for it; the source as the corpus holds it now has that
   digest; the quote is byte-exact in its text, does not read as an
   instruction, and is not from a passage the research set aside.

The stored draft is the model's title, markdown and citations as given.
Reads nothing itself: sources come through the `read` it is given. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orchestrator.core.errors import InvalidInput, NotFound
from orchestrator.harness.digests import args_digest
from orchestrator.harness.links import LinkPolicy, describe, foreign_links
from roles.artifacts import MARKER, SHA256_HEX, Citation, Draft, Evidence, SourceFile
from roles.injection import assess
from roles.reviewing import markers_in, normalize, parse_blocks
from roles.sentences import claims, states_something

MAX_TITLE_CHARS: Final = 200
MAX_MARKDOWN_CHARS: Final = 20_000
MAX_CITATIONS: Final = 60
MAX_QUOTE_CHARS: Final = 2_000
SHOWN_CHARS: Final = 80


class CitationArg(BaseModel):
    """One citation as a model gives it: the marker its sentences carry and the exact quote."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    marker: str = Field(pattern=MARKER, description='the marker as the markdown writes it, e.g. "[1]"')
    source: str = Field(min_length=1, max_length=1024)
    source_digest: str = Field(pattern=SHA256_HEX)
    quote: str = Field(min_length=1, max_length=MAX_QUOTE_CHARS, description="byte-exact text of the source")


class OwnDraft(BaseModel):
    """The fields of a draft a model writes itself: all three, or none (the deterministic
    writer writes the draft then)."""

    title: str | None = Field(default=None, min_length=1, max_length=MAX_TITLE_CHARS)
    markdown: str | None = Field(default=None, min_length=1, max_length=MAX_MARKDOWN_CHARS)
    citations: tuple[CitationArg, ...] | None = Field(default=None, max_length=MAX_CITATIONS)

    @model_validator(mode="after")
    def _all_or_none(self) -> Self:
        given = (self.title is not None, self.markdown is not None, self.citations is not None)
        if any(given) and not all(given):
            raise ValueError("title, markdown and citations come together, or none of them")
        return self

    def own_key(self) -> str:
        """What the idempotency key adds for a model's draft: a digest of its text and
        citations (a different draft of the same round is another call, not a conflict)."""
        if self.markdown is None:
            return ""
        citations = [c.model_dump(mode="json") for c in self.citations or ()]
        return "-" + args_digest([self.title, self.markdown, citations])[:16]


def checked_draft(
    own: OwnDraft,
    evidence: Evidence,
    *,
    brief: str,
    read: Callable[[str], SourceFile],
    link_hosts: frozenset[str] = frozenset(),
) -> Draft:
    """The model's draft, once every check of the module docstring passes."""
    if own.title is None or own.markdown is None or own.citations is None:
        raise InvalidInput("a draft of one's own needs a title, markdown and citations")
    title, markdown, citations = own.title, own.markdown, own.citations
    _check_size(title, markdown, citations)
    _check_links(title, markdown, LinkPolicy(link_hosts))
    _check_markers(markdown, citations)
    _check_citations(citations, evidence, brief, read)
    return Draft(
        title=title,
        markdown=markdown,
        citations=tuple(
            Citation(marker=c.marker, source=c.source, quote=c.quote, source_digest=c.source_digest)
            for c in citations
        ),
    )


def _check_size(title: str, markdown: str, citations: Sequence[CitationArg]) -> None:
    if not title.strip() or "\n" in title or len(title) > MAX_TITLE_CHARS:
        raise InvalidInput(f"the title must be one line of 1 to {MAX_TITLE_CHARS} characters")
    if len(markdown) > MAX_MARKDOWN_CHARS:
        raise InvalidInput(
            f"the markdown has {len(markdown):,} characters; a draft has at most {MAX_MARKDOWN_CHARS:,}"
        )
    if not citations:
        raise InvalidInput("the draft has no citations: every sentence that states something needs one")


def _check_links(title: str, markdown: str, policy: LinkPolicy) -> None:
    for where, text in (("the title", title), ("the markdown", markdown)):
        foreign = foreign_links(text, policy)
        if foreign:
            raise InvalidInput(f"{where} links outside the allowed hosts: {describe(foreign)}")


def _check_markers(markdown: str, citations: Sequence[CitationArg]) -> None:
    cited: set[str] = set()
    for citation in citations:
        if citation.marker in cited:
            raise InvalidInput(f"citation {citation.marker}: the marker is cited twice")
        cited.add(citation.marker)
    blocks = parse_blocks(markdown)
    carried: set[str] = set()
    for block in blocks:
        for marker in markers_in(block.text):
            if marker not in cited:
                raise InvalidInput(f"{block.location}: marker {marker} has no citation")
            if block.kind == "paragraph":
                carried.add(marker)
    for citation in citations:
        if citation.marker not in carried:
            raise InvalidInput(f"citation {citation.marker}: no paragraph carries {citation.marker}")
    by_marker = {c.marker: normalize(c.quote) for c in citations}
    for block in blocks:
        if block.kind != "paragraph":
            continue
        quotes = [by_marker[m] for m in markers_in(block.text)]
        for claim in claims(block.text):
            said = normalize(claim.text)
            if claim.markers or not states_something(said) or any(said in q for q in quotes):
                continue
            raise InvalidInput(
                f"{block.location} sentence {claim.number} states something without a citation "
                f"marker: {_shown(said)!r}"
            )


def _check_citations(
    citations: Sequence[CitationArg], evidence: Evidence, brief: str, read: Callable[[str], SourceFile]
) -> None:
    held: dict[str, set[str]] = {}
    for passage in evidence.passages:
        if not (passage.suspicious or passage.reasons):
            held.setdefault(passage.source, set()).add(passage.source_digest)
    set_aside = [normalize(p.text) for p in evidence.suspicious if p.text.strip()]
    files: dict[str, SourceFile | str] = {}
    for c in citations:
        where = f"citation {c.marker}"
        digests = held.get(c.source)
        if digests is None:
            raise InvalidInput(f"{where}: {c.source} is not one of the evidence's sources")
        if c.source_digest not in digests:
            now = ", ".join(sorted(d[:6] + "…" for d in digests))
            raise InvalidInput(
                f"{where}: the evidence holds {c.source} at {now}, not at {c.source_digest[:6]}…"
            )
        if c.source not in files:
            files[c.source] = _open(read, c.source)
        found = files[c.source]
        if isinstance(found, str):
            raise InvalidInput(f"{where}: {c.source} cannot be read ({found})")
        if found.digest != c.source_digest:
            raise InvalidInput(
                f"{where}: {c.source} has changed since {c.source_digest[:6]}… (it is at {found.digest[:6]}… now)"
            )
        if not c.quote.strip():
            raise InvalidInput(f"{where}: the quote is blank")
        if c.quote not in found.text:
            raise InvalidInput(f"{where}: the quote is not in {c.source} at {c.source_digest[:6]}…")
        reasons = assess(c.quote, brief)
        if reasons:
            raise InvalidInput(f"{where}: the quote reads as an instruction ({'; '.join(reasons[:2])})")
        quote = normalize(c.quote)
        if any(quote in text or text in quote for text in set_aside):
            raise InvalidInput(f"{where}: the quote is from a passage the research set aside as suspicious")


def _open(read: Callable[[str], SourceFile], source: str) -> SourceFile | str:
    """The source as the corpus holds it now, or why it cannot be read."""
    try:
        return read(source)
    except (InvalidInput, NotFound, OSError) as error:
        return str(error)


def _shown(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


__all__ = [
    "MAX_CITATIONS",
    "MAX_MARKDOWN_CHARS",
    "MAX_QUOTE_CHARS",
    "MAX_TITLE_CHARS",
    "CitationArg",
    "OwnDraft",
    "checked_draft",
]
