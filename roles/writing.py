"""The writer: a deterministic draft made only of verbatim sentences from the evidence.

`write_draft()` copies whole sentences from the evidence passages (never from
suspicious ones), puts the citation marker `` [n]`` after each, and lists every
marker in a closing ``## Sources`` section. Sentences that contain the brief's
terms come first (scored with SQLite FTS5's BM25, `ranking.score_texts`). The
layout is a ``# Title`` derived from the brief, a lede paragraph with the best
sentence (and the best from a second source when there is enough evidence),
then sections from up to three sources, each with paragraphs of one to three
sentences in source order.

Context is kept: a sentence that opens with a reference to an earlier one
("It", "They", "This", "Before that" …) is quoted together with the
sentence before it in its passage, or not at all when it opens the
passage. A section's heading is the one its sentences sit under in their
source (`roles.headings`), so a heading never stands over a paragraph about
something else; a source with no usable heading of its own is named by the
brief's terms its sentence holds, or by its file name, and a sentence nothing
names joins the section before. No heading is a placeholder (``Source 1``) or
repeats the title, one heading is one section, and the sources follow the
order in which the brief names what they are about (the first brief term that
tells the sources apart).

A revision passes the reviewer's findings and the previous draft: a finding on
a citation or paragraph drops the quotes it names, a changed source drops that
source at the digest that was cited, a missing source drops the source. When
nothing usable remains, `NothingToWrite` is raised (a version without citations
is never produced).

No I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import PurePosixPath
from typing import Final

from orchestrator.core.errors import InvalidInput
from orchestrator.harness.links import LinkPolicy, foreign_links
from roles.artifacts import Citation, Draft, Evidence, Finding, Passage
from roles.corpus import sentence_spans
from roles.headings import Outline, from_brief, heading_at, usable
from roles.injection import assess, foreign_urls
from roles.ranking import query_terms, score_texts
from roles.reviewing import (
    CONTENT_RULES,
    SOURCE_RULES,
    SOURCES_HEADING,
    leak_fragments,
    markers_in,
    normalize,
    parse_blocks,
)

# A person's rejection that names a citation: drop that quote, like a content finding.
PERSON_REJECTED: Final = "person-rejected"
DROP_QUOTE_RULES: Final = CONTENT_RULES | {PERSON_REJECTED}
MAX_SECTIONS: Final = 3
SENTENCES_PER_PARAGRAPH: Final = 3
MAX_SENTENCES_PER_SECTION: Final = 6
MIN_WORDS: Final = 4
MAX_SENTENCE_CHARS: Final = 400
MAX_TITLE_WORDS: Final = 10
FALLBACK_TITLE: Final = "Research Notes"

_LIST_PREFIX = re.compile(r"(?:[-*+]\s+|\d{1,3}[.)]\s+|>\s*)+")
_ENDS_SENTENCE = re.compile(r"[.!?][\"'\u201d\u2019)\]]*$")
_ITEM_START = re.compile(r"\n(?=[ \t]*(?:[-*+]\s|\d{1,3}[.)]\s|>))")
# Markers, code, tables, list or heading starts, and any markdown link, image or reference definition.
_UNSAFE = re.compile(r"\[\d+\]|`|\||\n\s*(?:[-*+>#|]\s|\d{1,3}[.)]\s)|^#|!\[|\]\(|\]:|<[a-z/!]")
_TITLE_WORD = re.compile(r"[^\W_][\w'\u2019-]*")
_CITED_LOCATION = re.compile(r"citation (\[[1-9][0-9]*\])")
_LEADING_WORDS = frozenset(
    "please write draft produce create prepare compose summarize summarise explain describe give make "
    "provide outline tell us me a an the short brief quick concise page article post piece summary "
    "overview note notes of on about for".split()
)
_PRONOUNS = frozenset("it its this these those they their them he his she her hers such".split())
_OPENING_MARKS = "\"'\u201c\u2018(*_ "
_REFERENCE = re.compile(
    r"""(?:it|its|this|these|those|they|their|theirs|them|he|him|his|she|her|hers|such|both|that|then
        |thereafter|thereby|thus|hence|therefore|however|moreover|furthermore|meanwhile|afterwards?|later
        |also|instead|nevertheless|nonetheless|still|otherwise|likewise|similarly|besides|yet|here
        |the\s+(?:latter|former|same|next|following|other)|another|each|either|neither
        |before\s+(?:that|then|this)|after\s+(?:that|this|then)|by\s+then|since\s+then|until\s+then
        |at\s+(?:that|the\s+same)\s+time|in\s+(?:that|this|the\s+same)\s+(?:year|period|time|decade|way|case)
        |as\s+a\s+result|in\s+addition|even\s+so|in\s+turn)\b""",
    re.IGNORECASE | re.VERBOSE,
)
_SMALL_WORDS = frozenset("a an the and or but of in on for to at by with from as".split())


class NothingToWrite(InvalidInput):
    """No usable evidence for the brief: none was found, or the findings excluded all of it."""


@dataclass(frozen=True)
class _Sentence:
    source: str
    source_digest: str
    offset: int
    quote: str
    rank: int
    score: float = 0.0
    matched: bool = False

    def key(self) -> tuple[int, float, int, int]:
        return (0 if self.matched else 1, -self.score, self.rank, self.offset)


@dataclass
class _Exclusions:
    quotes: set[tuple[str, str]] = field(default_factory=set)
    stale: set[tuple[str, str]] = field(default_factory=set)
    sources: set[str] = field(default_factory=set)

    def drops(self, passage: Passage) -> bool:
        return passage.source in self.sources or (passage.source, passage.source_digest) in self.stale


def write_draft(
    brief: str,
    evidence: Evidence,
    *,
    findings: Sequence[Finding] | None = None,
    previous: Draft | None = None,
    link_hosts: frozenset[str] = frozenset(),
    outlines: Mapping[str, Outline] | None = None,
) -> Draft:
    """Write (or, with `findings` and `previous`, revise) a draft from the evidence.

    `outlines` holds each source's headings (`roles.headings.outline`, read at the
    digest the evidence cites): a section is headed by the heading its sentences sit
    under in their source.
    A sentence carrying a link or URL to a host outside `link_hosts`
    (`PRESSROOM_LINK_HOSTS`) is never quoted, even when the brief names it.
    Raises `NothingToWrite` when no sentence can be cited. Same inputs, same draft.
    """
    exclusions = _exclusions(findings or (), previous)
    sentences = _candidates(brief, evidence, exclusions, LinkPolicy(link_hosts))
    if not sentences:
        reason = "the review findings excluded every usable sentence" if findings else "no usable evidence"
        raise NothingToWrite(
            f"nothing to write for the brief: {reason}",
            files_read=evidence.files_read,
            passages=len(evidence.passages),
            suspicious=len(evidence.suspicious),
        )
    title = title_from_brief(brief)
    lede, sections = _plan(sentences, brief, title, outlines or {})
    return _render(title, lede, sections)


def title_from_brief(brief: str) -> str:
    """A short title-case title from the first clause of the brief, without its URLs."""
    text = brief
    for url in foreign_urls(brief):
        text = text.replace(url, " ")
    first = re.split(r"[.!?\n,;:(]", text.strip(), maxsplit=1)[0]
    words = _TITLE_WORD.findall(first)
    while words and words[0].casefold() in _LEADING_WORDS | _SMALL_WORDS:
        words.pop(0)
    words = words[:MAX_TITLE_WORDS]
    while words and words[-1].casefold() in _SMALL_WORDS:
        words.pop()
    title = _title_case(words)
    if title and not assess(title, brief):
        return title
    fallback = _title_case(query_terms(brief)[:5])
    return fallback if fallback and not assess(fallback, brief) else FALLBACK_TITLE


def _title_case(words: Sequence[str]) -> str:
    """Capitalise each word except small ones after the first; words with capitals stay as written."""

    def shape(index: int, word: str) -> str:
        if index and word.casefold() in _SMALL_WORDS:
            return word.lower()
        if word != word.lower():
            return word
        return word[:1].upper() + word[1:]

    return " ".join(shape(i, w) for i, w in enumerate(words))


def _exclusions(findings: Sequence[Finding], previous: Draft | None) -> _Exclusions:
    """What the findings rule out; findings cannot be placed without the draft they were about."""
    excluded = _Exclusions()
    if previous is None:
        return excluded
    by_marker = {c.marker: c for c in previous.citations}
    blocks = {b.location: b for b in parse_blocks(previous.markdown) if b.kind == "paragraph"}
    for finding in findings:
        cited = _CITED_LOCATION.fullmatch(finding.location)
        citation = by_marker.get(cited.group(1)) if cited else None
        if citation is not None:
            if finding.rule == "source-changed":
                excluded.stale.add((citation.source, citation.source_digest))
            elif finding.rule in SOURCE_RULES:
                excluded.sources.add(citation.source)
            elif finding.rule in DROP_QUOTE_RULES:
                excluded.quotes.add((citation.source, normalize(citation.quote)))
        elif finding.rule in DROP_QUOTE_RULES and finding.location in blocks:
            for marker in markers_in(blocks[finding.location].text):
                if marker in by_marker:
                    named = by_marker[marker]
                    excluded.quotes.add((named.source, normalize(named.quote)))
    return excluded


def _candidates(brief: str, evidence: Evidence, excluded: _Exclusions, links: LinkPolicy) -> list[_Sentence]:
    """Every quotable sentence of the usable passages, scored against the brief."""
    flagged = [normalize(p.text) for p in evidence.suspicious]
    leaks = leak_fragments(flagged)
    found: list[_Sentence] = []
    seen: set[str] = set()
    for rank, passage in enumerate(evidence.passages):
        if passage.suspicious or passage.reasons or excluded.drops(passage) or assess(passage.source):
            continue
        for start, end in _with_context(passage.text):
            quote = passage.text[start:end]
            plain = normalize(quote)
            if (
                plain in seen
                or (passage.source, plain) in excluded.quotes
                or not _quotable(quote, brief, links)
            ):
                continue
            if any(plain in text for text in flagged) or any(leak in plain for leak in leaks):
                continue
            seen.add(plain)
            found.append(_Sentence(passage.source, passage.source_digest, passage.start + start, quote, rank))
    scores = dict(score_texts(brief, [s.quote for s in found]))
    return [
        _Sentence(s.source, s.source_digest, s.offset, s.quote, s.rank, scores.get(i, 0.0), i in scores)
        for i, s in enumerate(found)
    ]


def _with_context(text: str) -> list[tuple[int, int]]:
    """Quotable spans of a passage: its sentences, except that a sentence opening with a
    reference to what came before ("It", "They", "Before that" …) is joined to the sentence
    before it, and dropped when it opens the passage or the joined quote would be too long."""
    spans: list[tuple[int, int]] = []
    for start, end in _item_sentences(text):
        prefix = _LIST_PREFIX.match(text, start, end)
        start = prefix.end() if prefix else start
        if not opens_with_reference(text[start:end]):
            spans.append((start, end))
            continue
        last = spans[-1] if spans else None
        if last is not None and last[1] > last[0] and end - last[0] <= MAX_SENTENCE_CHARS:
            spans[-1] = (last[0], end)
        else:
            spans.append((start, start))  # dropped: nothing after it may join across it
    return [(s, e) for s, e in spans if e > s]


def opens_with_reference(sentence: str) -> bool:
    """Whether a sentence opens with a word or phrase whose referent is in an earlier sentence."""
    return _REFERENCE.match(sentence.lstrip(_OPENING_MARKS)) is not None


def _item_sentences(text: str) -> list[tuple[int, int]]:
    """Sentences, where each list item or quoted line starts afresh."""
    cuts = [0, *(m.end() for m in _ITEM_START.finditer(text)), len(text)]
    return [span for a, b in pairwise(cuts) for span in sentence_spans(text, a, b)]


def _quotable(quote: str, brief: str, links: LinkPolicy) -> bool:
    return (
        len(quote.split()) >= MIN_WORDS
        and len(quote) <= MAX_SENTENCE_CHARS
        and _ENDS_SENTENCE.search(quote) is not None
        and _UNSAFE.search(quote) is None
        and not assess(quote, brief)
        and not foreign_links(quote, links)
    )


def _plan(
    sentences: list[_Sentence], brief: str, title: str, outlines: Mapping[str, Outline]
) -> tuple[list[_Sentence], list[tuple[str | None, list[_Sentence]]]]:
    """The lede sentences and, per source, the section's sentences: the best-ranked sources,
    in the order the brief names what they are about."""
    ordered = sorted(sentences, key=_Sentence.key)
    # The lede is read without its context: prefer sentences that do not open with a pronoun.
    standalone = [s for s in ordered if s.quote.split(maxsplit=1)[0].casefold() not in _PRONOUNS] or ordered
    lede = [standalone[0]]
    if len(ordered) >= 4:
        others = [s for s in standalone + ordered if s is not lede[0]]
        lede.append(next((s for s in others if s.source != lede[0].source), others[0]))
    rest = [s for s in ordered if s not in lede]
    sources = sorted({s.source for s in rest}, key=lambda src: min(s.rank for s in rest if s.source == src))
    picked = sources[:MAX_SECTIONS]
    order = _term_order(brief, {src: [s.quote for s in rest if s.source == src] for src in picked})
    sections: list[tuple[str | None, list[_Sentence]]] = []
    for source in sorted(picked, key=lambda src: (order[src], picked.index(src))):
        own = [s for s in rest if s.source == source]
        chosen = own[:SENTENCES_PER_PARAGRAPH]
        chosen += [s for s in own[SENTENCES_PER_PARAGRAPH:] if s.matched]
        chosen = chosen[:MAX_SENTENCES_PER_SECTION]
        for heading, group in _under_headings(chosen, outlines.get(source, ()), brief, title):
            same = next((group for name, group in sections if name is not None and name == heading), None)
            if same is not None:
                same.extend(group)  # one heading, one section, whichever source says it
            elif sections and heading is None:
                sections[-1][1].extend(group)  # nothing names it: it joins the section before
            else:
                sections.append((heading, group))
    return lede, sections


def _under_headings(
    chosen: list[_Sentence], found: Outline, brief: str, title: str
) -> list[tuple[str | None, list[_Sentence]]]:
    """One source's sentences, in source order, grouped by the heading each sits under there."""
    groups: list[tuple[str | None, list[_Sentence]]] = []
    for sentence in sorted(chosen, key=lambda s: s.offset):
        own = heading_at(found, sentence.offset)
        if groups and groups[-1][0] == own:
            groups[-1][1].append(sentence)
        else:
            groups.append((own, [sentence]))
    return [(_heading(own, group, brief, title), group) for own, group in groups]


def _term_order(brief: str, texts: dict[str, list[str]]) -> dict[str, int]:
    """Per source, the position in the brief of the first term that sets it apart (a term
    some of the sources match but not all); sources no such term names come last."""
    terms = query_terms(brief)
    names = list(texts)
    joined = [" ".join(texts[name]) for name in names]
    order = dict.fromkeys(names, len(terms))
    for position, term in enumerate(terms):
        matched = {names[i] for i, _ in score_texts(term, joined)}
        if 0 < len(matched) < len(names):
            for name in matched:
                order[name] = min(order[name], position)
    return order


def _heading(own: str | None, group: list[_Sentence], brief: str, title: str) -> str | None:
    """The heading the sentences sit under in their source; else the brief's terms they hold;
    else the source's file name when that names something; None when nothing will do (the
    sentences then join the section before). Never a placeholder, never the title again."""
    avoid = (title, SOURCES_HEADING)
    if usable(own, avoid=avoid):
        return own
    if named := from_brief(brief, [s.quote for s in group], avoid=avoid):
        return named
    stem = _title_case([w for w in re.split(r"[\s_.-]+", PurePosixPath(group[0].source).stem) if w])
    return stem if usable(stem, avoid=avoid) and not any(c.isdigit() for c in stem) else None


def _words(text: str) -> tuple[str, ...]:
    return tuple(w.casefold() for w in _TITLE_WORD.findall(text))


def _paragraphs(sentences: list[_Sentence]) -> list[list[_Sentence]]:
    """Split into the fewest paragraphs of at most three sentences, as even as possible."""
    count = -(-len(sentences) // SENTENCES_PER_PARAGRAPH)
    size = -(-len(sentences) // count) if count else 0
    return [sentences[i : i + size] for i in range(0, len(sentences), size)] if size else []


def _render(title: str, lede: list[_Sentence], sections: list[tuple[str | None, list[_Sentence]]]) -> Draft:
    citations: list[Citation] = []

    def cite(sentences: list[_Sentence]) -> str:
        parts: list[str] = []
        for s in sentences:
            marker = f"[{len(citations) + 1}]"
            citations.append(
                Citation(marker=marker, source=s.source, quote=s.quote, source_digest=s.source_digest)
            )
            parts.append(f"{normalize(s.quote)} {marker}")
        return " ".join(parts)

    lines = [f"# {title}", "", cite(lede), ""]
    for heading, sentences in sections:
        if heading is not None:
            lines += [f"## {heading}", ""]
        for paragraph in _paragraphs(sentences):
            lines += [cite(paragraph), ""]
    lines += [f"## {SOURCES_HEADING}", ""]
    lines += [f"- {c.marker} {c.source}" for c in citations]
    return Draft(title=title, markdown="\n".join(lines) + "\n", citations=tuple(citations))
