"""The reviewer's checks: one draft against the ORIGINAL corpus files and the brief.

`review()` re-reads every cited source through `corpus.read_source()` (never the
writer's evidence) and reports findings; the verdict is ``pass`` exactly when
no finding is an error. `parse_blocks()` is how a draft's markdown is read
here and by the writer when it revises: headings, body paragraphs, and the
lines of a final ``## Sources`` list. Locations read ``paragraph N``,
``heading N``, ``reference N`` (1-based within their kind), ``citation [N]`` or
``draft``.

Rules (all errors unless noted): ``quote-not-verbatim``, ``source-changed``,
``source-missing``, ``source-outside-corpus``, ``duplicate-citation``,
``dangling-marker``, ``unused-citation``, ``uncited-paragraph``,
``instruction-leak``, ``foreign-url`` (a URL the brief does not name, or
one that no cited source contains), ``reference-mismatch``,
``no-citations``, ``uncited-sentence`` and ``unsupported-sentence`` (a
sentence of a cited paragraph that states something carries no marker, or
its markers' quotes do not back it; located ``paragraph N sentence M``; see
`roles.sentences`), the floor's ``number-not-in-quote``,
``entity-not-in-quote`` and ``negation-mismatch`` (a cited sentence states a
number or a name its quotes do not have, or negates what they state, or the
other way round; same location; see `roles.floor_checks`),
``hidden-characters`` (warning), ``quote-not-in-text`` (warning: the
paragraph that carries a marker does not contain its quote).

`cited_sentences()` numbers the sentences a reviewer judges (`review.record`
takes judgments by that number; the rules of a reviewer's reads and judgments
are in `roles.judgments`).

Reads files (through `roles.corpus`); writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from orchestrator.core.errors import InvalidInput, NotFound
from roles.artifacts import Citation, Finding, ReviewReport, SourceFile
from roles.corpus import SourceOutsideCorpus, read_source, sentence_spans
from roles.floor_checks import floor_findings
from roles.injection import FOREIGN_URL, HIDDEN_CHARACTERS, assess, foreign_urls, rule_of
from roles.sentences import claims, states_something, supports

SOURCES_HEADING: Final = "Sources"
MARKER_IN_TEXT: Final = re.compile(r"\[([1-9][0-9]*)\](?![(:\[])")
REFERENCE_LINE: Final = re.compile(r"^[-*]\s+(\[[1-9][0-9]*\])\s+(\S.*?)\s*$")
_HEADING_LINE = re.compile(r"^\s{0,3}(#{1,6})(?:\s+(.*?))?\s*#*\s*$")
_MIN_LEAK_CHARS = 20

# Rules whose finding says the cited source itself cannot be trusted as it was cited.
SOURCE_RULES: Final = frozenset({"source-changed", "source-missing", "source-outside-corpus"})
# Rules whose finding says the cited or written text must not be used again.
CONTENT_RULES: Final = frozenset({"quote-not-verbatim", "instruction-leak", FOREIGN_URL})


@dataclass(frozen=True)
class Block:
    """One piece of a draft: a heading, a body paragraph, or a line of the Sources list."""

    kind: Literal["heading", "paragraph", "reference"]
    number: int
    text: str

    @property
    def location(self) -> str:
        return f"{self.kind} {self.number}"


def parse_blocks(markdown: str) -> list[Block]:
    """Split markdown into blocks; blank lines and heading lines end a paragraph."""
    blocks: list[Block] = []
    counts = {"heading": 0, "paragraph": 0, "reference": 0}
    pending: list[str] = []
    in_sources = False

    def add(kind: Literal["heading", "paragraph", "reference"], text: str) -> None:
        counts[kind] += 1
        blocks.append(Block(kind, counts[kind], text))

    def flush() -> None:
        if pending:
            add("paragraph", "\n".join(pending))
            pending.clear()

    for line in markdown.splitlines():
        heading = _HEADING_LINE.match(line)
        if heading:
            flush()
            title = heading.group(2) or ""
            in_sources = len(heading.group(1)) == 2 and title.strip().casefold() == SOURCES_HEADING.casefold()
            add("heading", title)
        elif not line.strip():
            flush()
        elif in_sources:
            add("reference", line.strip())
        else:
            pending.append(line.strip())
    flush()
    return blocks


def markers_in(text: str) -> list[str]:
    """Citation markers (``[n]``) in a piece of text, in order, once each."""
    return list(dict.fromkeys(f"[{n}]" for n in MARKER_IN_TEXT.findall(text)))


def normalize(text: str) -> str:
    """Whitespace collapsed: how a quote spread over source lines reads in one paragraph."""
    return " ".join(text.split())


def review(
    draft_markdown: str,
    citations: Sequence[Citation],
    *,
    corpus_root: Path,
    brief: str,
    version_digest: str,
    suspicious_texts: Iterable[str] = (),
    read: Callable[[str], SourceFile] | None = None,
) -> ReviewReport:
    """Check one version; see the module docstring for the rules.

    `read` reads a cited source by its corpus path (default: `corpus.read_source`
    on `corpus_root`; the role tools pass the corpus index's reader, which
    answers from the index while the file is unchanged).
    """
    root = Path(corpus_root)
    reader = read or (lambda source: read_source(root, source))
    blocks = parse_blocks(draft_markdown)
    flagged = [normalize(t) for t in suspicious_texts if t.strip()]
    findings: list[Finding] = []
    if not citations:
        findings.append(_error("no-citations", "draft", "the draft has no citations"))
    loaded: dict[str, SourceFile | Finding] = {}
    for citation in citations:
        if citation.source not in loaded:
            loaded[citation.source] = _load(reader, citation.source)
    findings += _check_citations(citations, blocks, loaded, brief, flagged)
    findings += _check_blocks(blocks, citations, brief, flagged)
    cited = [f.text for f in loaded.values() if isinstance(f, SourceFile)]
    findings += [f for b in blocks for f in _uncited_urls(b, brief, cited)]
    has_error = any(f.severity == "error" for f in findings)
    return ReviewReport(
        verdict="changes_requested" if has_error else "pass",
        findings=tuple(findings),
        checked_citations=len(citations),
        version_digest=version_digest,
    )


def _check_citations(
    citations: Sequence[Citation],
    blocks: list[Block],
    cache: dict[str, SourceFile | Finding],
    brief: str,
    flagged: list[str],
) -> list[Finding]:
    findings: list[Finding] = []
    paragraphs = [b for b in blocks if b.kind == "paragraph"]
    seen: set[str] = set()
    for citation in citations:
        where = f"citation {citation.marker}"
        if citation.marker in seen:
            findings.append(_error("duplicate-citation", where, f"marker {citation.marker} is cited twice"))
        seen.add(citation.marker)
        loaded = cache[citation.source]
        if isinstance(loaded, Finding):
            findings.append(loaded.model_copy(update={"location": where}))
        else:
            if loaded.digest != citation.source_digest:
                findings.append(
                    _error("source-changed", where, f"{citation.source} changed since it was cited")
                )
            if citation.quote not in loaded.text:
                findings.append(
                    _error("quote-not-verbatim", where, f"the quote does not occur in {citation.source}")
                )
        findings += _text_findings(citation.quote, brief, where)
        quote = normalize(citation.quote)
        if any(quote in text or text in quote for text in flagged):
            findings.append(_error("instruction-leak", where, "quotes a passage set aside as suspicious"))
        carriers = [b for b in paragraphs if citation.marker in markers_in(b.text)]
        if not carriers:
            findings.append(_error("unused-citation", where, f"no paragraph carries {citation.marker}"))
        elif not any(quote in normalize(b.text) for b in carriers):
            findings.append(
                Finding(
                    rule="quote-not-in-text",
                    location=where,
                    message=f"the paragraph with {citation.marker} does not contain its quote",
                    severity="warning",
                )
            )
    return findings


def _check_blocks(
    blocks: list[Block], citations: Sequence[Citation], brief: str, flagged: list[str]
) -> list[Finding]:
    findings: list[Finding] = []
    by_marker = {c.marker: c for c in citations}
    leaks = leak_fragments(flagged)
    body_markers: list[str] = []
    listed: set[str] = set()
    for block in blocks:
        findings += _text_findings(block.text, brief, block.location)
        if block.kind == "reference":
            findings += _check_reference(block, by_marker, listed)
            continue
        if block.kind == "heading":
            continue
        markers = markers_in(block.text)
        body_markers += markers
        if not markers:
            findings.append(_error("uncited-paragraph", block.location, "the paragraph cites no source"))
        for marker in markers:
            if marker not in by_marker:
                findings.append(_error("dangling-marker", block.location, f"marker {marker} has no citation"))
        if markers:
            findings += sentence_findings(block, by_marker, brief)
        text = normalize(block.text)
        if any(leak in text for leak in leaks):
            findings.append(
                _error(
                    "instruction-leak", block.location, "contains text from a passage set aside as suspicious"
                )
            )
    if any(b.kind == "reference" for b in blocks):
        for marker in dict.fromkeys(body_markers):
            if marker in by_marker and marker not in listed:
                findings.append(
                    _error(
                        "reference-mismatch",
                        f"citation {marker}",
                        f"{marker} is missing from the Sources list",
                    )
                )
    return findings


def _check_reference(block: Block, by_marker: dict[str, Citation], listed: set[str]) -> list[Finding]:
    line = REFERENCE_LINE.match(block.text)
    if not line:
        return [_error("reference-mismatch", block.location, "a Sources line must read '- [n] path'")]
    marker, source = line.group(1), line.group(2)
    listed.add(marker)
    if marker not in by_marker:
        return [_error("reference-mismatch", block.location, f"{marker} is listed but has no citation")]
    if by_marker[marker].source != source:
        return [_error("reference-mismatch", block.location, f"{marker} is listed with another source")]
    return []


def _text_findings(text: str, brief: str, location: str) -> list[Finding]:
    findings: list[Finding] = []
    for reason in assess(text, brief):
        rule = rule_of(reason)
        if rule == FOREIGN_URL:
            findings.append(
                _error(FOREIGN_URL, location, f"a URL or destination absent from the brief ({reason})")
            )
        elif rule == HIDDEN_CHARACTERS:
            findings.append(Finding(rule=rule, location=location, message=reason, severity="warning"))
        else:
            findings.append(_error("instruction-leak", location, f"reads as an instruction ({reason})"))
    return findings


def _uncited_urls(block: Block, brief: str, cited_texts: list[str]) -> list[Finding]:
    """URLs the brief allows but no cited source contains (those the brief does not
    allow are already `foreign-url` findings of `_text_findings`)."""
    not_in_brief = set(foreign_urls(block.text, brief))
    return [
        _error(FOREIGN_URL, block.location, f"the URL {url[:80]} is not from a cited source")
        for url in foreign_urls(block.text)
        if url not in not_in_brief and not any(url in text for text in cited_texts)
    ]


def _load(read: Callable[[str], SourceFile], source: str) -> SourceFile | Finding:
    try:
        return read(source)
    except SourceOutsideCorpus:
        return _error("source-outside-corpus", "", f"{source!r} is not a path inside the corpus")
    except NotFound:
        return _error("source-missing", "", f"{source} is not in the corpus")
    except InvalidInput as error:
        return _error("source-missing", "", f"{source} cannot be read: {error}")


def leak_fragments(suspicious_texts: Iterable[str]) -> list[str]:
    """The sentences of suspicious texts (whitespace collapsed) long enough to recognise in a draft."""
    found: list[str] = []
    for text in suspicious_texts:
        plain = normalize(text)
        found += [plain[s:e] for s, e in sentence_spans(plain) if e - s >= _MIN_LEAK_CHARS]
    return found


def sentence_findings(block: Block, by_marker: dict[str, Citation], brief: str = "") -> list[Finding]:
    """Each sentence of a cited paragraph that states something is backed by its own markers' quotes,
    and passes the floor's checks against them."""
    findings: list[Finding] = []
    sentences = claims(block.text)
    for index, claim in enumerate(sentences):
        if not states_something(claim.text):
            continue
        where = f"{block.location} sentence {claim.number}"
        shown = claim.text if len(claim.text) <= 80 else claim.text[:77] + "..."
        cited = [by_marker[m] for m in claim.markers if m in by_marker]
        if not claim.markers:
            # A quote the sentence splitter cut in two: the part before the marker is that quote's too.
            after = next((c for c in sentences[index + 1 :] if c.markers), None)
            quotes = [
                normalize(by_marker[m].quote) for m in (after.markers if after else ()) if m in by_marker
            ]
            if not any(normalize(claim.text) in q for q in quotes):
                findings.append(_error("uncited-sentence", where, f"no citation backs {shown!r}"))
        elif cited:
            named = ", ".join(c.marker for c in cited)
            quotes = [c.quote for c in cited]
            if not supports(quotes, claim.text):
                findings.append(
                    _error("unsupported-sentence", where, f"the quote of {named} does not support {shown!r}")
                )
            findings += floor_findings(claim.text, quotes, brief, location=where, named=named)
    return findings


@dataclass(frozen=True)
class CitedSentence:
    """A sentence a reviewer judges: its number (1-based, over the whole version), where it
    is (``paragraph N sentence M``), its text without markers, and the citations it carries."""

    index: int
    location: str
    text: str
    citations: tuple[Citation, ...]


def cited_sentences(markdown: str, citations: Sequence[Citation]) -> list[CitedSentence]:
    """The body sentences that state something and carry a known citation, in order."""
    by_marker = {c.marker: c for c in citations}
    found: list[CitedSentence] = []
    for block in parse_blocks(markdown):
        if block.kind != "paragraph":
            continue
        for claim in claims(block.text):
            cited = tuple(by_marker[m] for m in claim.markers if m in by_marker)
            if cited and states_something(claim.text):
                where = f"{block.location} sentence {claim.number}"
                found.append(CitedSentence(len(found) + 1, where, claim.text, cited))
    return found


def _error(rule: str, location: str, message: str) -> Finding:
    return Finding(rule=rule, location=location, message=message, severity="error")
