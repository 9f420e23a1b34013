"""A version's body as the reviewer reads it: markers that open their quotes, findings in place.

`render_document(markdown, citations, contexts, findings)` returns the body
as `Markup`. Blocks are read as the reviewer reads them
(`roles.reviewing.parse_blocks`: headings, paragraphs, the Sources list,
numbered the same way), and each paragraph is split into the sentences
`roles.sentences.claims` numbers, so a finding located ``paragraph 2
sentence 3`` is drawn on that very sentence (`id="p2s3"`). Each ``[n]``
marker is a link to an aside placed right after its paragraph, shown by CSS
(`:target`) without leaving the page: the quote within the surrounding lines
of its source, the source's path and digest, and any finding about that
citation. Text goes through markdown-it with raw HTML off (inline markup
only), and every value is escaped; no I/O here.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup

from roles.corpus import sentence_spans
from roles.reviewing import parse_blocks

MARKER = re.compile(r"\[([1-9][0-9]*)\](?![(:\[])")
_LEADING_MARKERS = re.compile(r"^(?:\s*\[[1-9][0-9]*\])+[.,;:]?")
_TAG = re.compile(r"(<[^>]*>)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s")
_BLOCKISH = re.compile(r"^\s{0,3}(?:[-*+]\s|\d+[.)]\s|>|```|~~~|\|)")
_LOCATION = re.compile(r"^(paragraph|heading|reference) (\d+)(?: sentence (\d+))?$")
_CITATION_AT = re.compile(r"^citation (\[[1-9][0-9]*\])$")


@cache
def _md() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False})


@dataclass
class Findings:
    """The review's findings keyed by where they point: an element id, or a marker."""

    by_anchor: dict[str, list[tuple[int, Mapping[str, Any]]]] = field(default_factory=dict)
    by_marker: dict[str, list[tuple[int, Mapping[str, Any]]]] = field(default_factory=dict)


def anchor_of(location: str) -> str | None:
    """The element id a finding's location names: `paragraph 2 sentence 3` → `p2s3`."""
    found = _LOCATION.match(location.strip())
    if found:
        kind, number, sentence = found.groups()
        return f"{kind[0]}{number}" + (f"s{sentence}" if sentence else "")
    cited = _CITATION_AT.match(location.strip())
    if cited:
        return "c" + cited.group(1)[1:-1]
    return None


def index_findings(findings: Sequence[Mapping[str, Any]]) -> Findings:
    """Number the findings (1-based, as listed) and key them by the place they are about."""
    out = Findings()
    for number, finding in enumerate(findings, start=1):
        location = str(finding.get("location") or "")
        cited = _CITATION_AT.match(location.strip())
        if cited:
            out.by_marker.setdefault(cited.group(1), []).append((number, finding))
            continue
        anchor = anchor_of(location)
        if anchor:
            out.by_anchor.setdefault(anchor, []).append((number, finding))
    return out


def sentence_pieces(paragraph: str) -> tuple[str, list[tuple[int, int, int]]]:
    """The paragraph with white space collapsed, and its sentences as (number, start, end).

    Numbered as `roles.sentences.claims` numbers them: a marker written after
    a sentence's full stop belongs to that sentence.
    """
    text = " ".join(paragraph.split())
    pieces: list[list[int]] = []
    for start, end in sentence_spans(text):
        begin = start
        leading = _LEADING_MARKERS.match(text[start:end])
        if leading and pieces:
            pieces[-1][1] = start + leading.end()
            begin = start + leading.end()
            while begin < end and text[begin].isspace():
                begin += 1
        if text[begin:end].strip():
            pieces.append([begin, end])
    return text, [(n, s, e) for n, (s, e) in enumerate(pieces, start=1)]


def _esc(value: object) -> str:
    return html.escape("" if value is None else str(value))


class _Renderer:
    def __init__(
        self,
        citations: Sequence[Mapping[str, Any]],
        contexts: Mapping[str, Any],
        findings: Findings,
    ) -> None:
        self.citations = {str(c.get("marker")): c for c in citations}
        self.contexts = contexts
        self.findings = findings
        self.out: list[str] = []

    # -- markers -------------------------------------------------------------
    def _markers(self, rendered: str, block: str, opened: list[str]) -> str:
        """Turn `[n]` in the text (never inside a tag) into links to the block's asides."""

        def link(m: re.Match[str]) -> str:
            marker = m.group(0)
            if marker not in self.citations:
                return (
                    f'<span class="cite dangling" title="no citation has this marker">{_esc(marker)}</span>'
                )
            if marker not in opened:
                opened.append(marker)
            n = m.group(1)
            tone = " has-finding" if marker in self.findings.by_marker else ""
            return (
                f'<a class="cite{tone}" href="#q-{block}-{n}" data-marker="{n}" '
                f'aria-controls="q-{block}-{n}" title="show the quote of {marker}">{_esc(marker)}</a>'
            )

        parts = _TAG.split(rendered)
        return "".join(p if p.startswith("<") else MARKER.sub(link, p) for p in parts)

    def _inline(self, text: str) -> str:
        return str(_md().renderInline(text))

    def _flags(self, anchor: str) -> tuple[str, str]:
        """(class and title attributes, trailing finding numbers) for an element with findings."""
        found = self.findings.by_anchor.get(anchor)
        if not found:
            return "", ""
        worst = "error" if any(f.get("severity", "error") == "error" for _, f in found) else "warning"
        title = "; ".join(f"{f.get('rule')}: {f.get('message')}" for _, f in found)
        numbers = "".join(
            f'<a class="fnum f-{_esc(f.get("severity", "error"))}" href="#finding-{n}">{n}</a>'
            for n, f in found
        )
        return f' class="flag f-{worst}" title="{_esc(title)}"', numbers

    # -- blocks --------------------------------------------------------------
    def heading(self, number: int, level: int, text: str) -> None:
        anchor = f"h{number}"
        attrs, numbers = self._flags(anchor)
        self.out.append(f'<h{level} id="{anchor}"{attrs}>{self._inline(text)}{numbers}</h{level}>')

    def paragraph(self, number: int, text: str) -> None:
        block = f"p{number}"
        opened: list[str] = []
        attrs, numbers = self._flags(block)
        if _BLOCKISH.match(text):
            body = self._markers(str(_md().render(text)), block, opened)
            self.out.append(f'<div id="{block}" class="para{" flag" if attrs else ""}">{body}{numbers}</div>')
        else:
            plain, pieces = sentence_pieces(text)
            parts: list[str] = []
            at = 0
            for n, start, end in pieces:
                parts.append(_esc(plain[at:start]))
                anchor = f"{block}s{n}"
                s_attrs, s_numbers = self._flags(anchor)
                inner = self._markers(self._inline(plain[start:end]), block, opened)
                parts.append(
                    f'<span class="sentence" id="{anchor}"><span{s_attrs}>{inner}</span>{s_numbers}</span>'
                )
                at = end
            parts.append(_esc(plain[at:]))
            cls = "para flag-block" if attrs else "para"
            self.out.append(f'<p id="{block}" class="{cls}">{"".join(parts)}{numbers}</p>')
        for marker in opened:
            self.out.append(self._aside(block, marker))

    def references(self, items: list[tuple[int, str]]) -> None:
        self.out.append('<ul class="sources">')
        for number, text in items:
            anchor = f"r{number}"
            attrs, numbers = self._flags(anchor)
            line = re.sub(r"^[-*]\s+", "", text)
            inner = MARKER.sub(
                lambda m: f'<a class="cite-ref" href="#cite-{m.group(1)}">{_esc(m.group(0))}</a>',
                _esc(line),
            )
            self.out.append(f'<li id="{anchor}"><span{attrs}>{inner}</span>{numbers}</li>')
        self.out.append("</ul>")

    def _aside(self, block: str, marker: str) -> str:
        n = marker[1:-1]
        citation = self.citations[marker]
        context = self.contexts.get(marker) or {}
        digest = str(citation.get("source_digest") or "")
        head = (
            f'<header><strong>{_esc(marker)}</strong> <code class="path">{_esc(citation.get("source"))}</code>'
            f' <span class="muted">sha256</span> <code title="{_esc(digest)}">{_esc(digest[:12])}</code>'
            f'<a class="close" href="#{block}" title="close">close</a></header>'
        )
        notes = []
        if context.get("changed"):
            notes.append('<p class="warn">The source has changed since it was cited.</p>')
        if context.get("problem"):
            notes.append(f'<p class="warn">{_esc(context["problem"])}</p>')
        for number, finding in self.findings.by_marker.get(marker, []):
            notes.append(
                f'<p class="finding-note f-{_esc(finding.get("severity", "error"))}">'
                f'<a href="#finding-{number}">finding {number}</a> {_esc(finding.get("rule"))}: '
                f"{_esc(finding.get('message'))}</p>"
            )
        lines = context.get("lines")
        if lines:
            rows = []
            for line in lines:
                text = "".join(f"<mark>{_esc(t)}</mark>" if marked else _esc(t) for t, marked in line.pieces)
                rows.append(f'<li value="{int(line.number)}">{text or "&#8203;"}</li>')
            body = f'<ol class="src">{"".join(rows)}</ol>'
        else:
            body = f'<blockquote class="quote-text">{_esc(citation.get("quote"))}</blockquote>'
        return f'<aside class="quote" id="q-{block}-{n}">{head}{"".join(notes)}{body}</aside>'


def render_document(
    markdown: str,
    citations: Sequence[Mapping[str, Any]],
    contexts: Mapping[str, Any],
    findings: Sequence[Mapping[str, Any]],
) -> Markup:
    """The body with linked markers, quote asides and findings drawn where they point."""
    renderer = _Renderer(citations, contexts, index_findings(findings))
    levels = [len(m.group(1)) for line in markdown.splitlines() if (m := _HEADING.match(line + " "))]
    references: list[tuple[int, str]] = []
    headings = 0
    for block in parse_blocks(markdown):
        if block.kind != "reference" and references:
            renderer.references(references)
            references = []
        if block.kind == "heading":
            level = levels[headings] if headings < len(levels) else 2
            headings += 1
            renderer.heading(block.number, level, block.text)
        elif block.kind == "paragraph":
            renderer.paragraph(block.number, block.text)
        else:
            references.append((block.number, block.text))
    if references:
        renderer.references(references)
    return Markup("\n".join(renderer.out))


__all__ = ["anchor_of", "index_findings", "render_document", "sentence_pieces"]
