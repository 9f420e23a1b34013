"""A deterministic coherence check of one version: does its layout mislead a reader?

`incoherent(markdown, citations, corpus)` lists the problems, one line each
(an empty list is a coherent version):

- ``placeholder heading``: a section heading that names nothing (``Source 1``,
  ``Section 2``, ``Part``, ``Untitled``…) or repeats the title;
- ``heading over other matter``: a section heading over a quote that its
  source puts under a different section heading (level 2 or deeper) of its
  own: the reader is told the paragraph is about one thing while its source
  says it is about another;
- ``opens without its antecedent``: a paragraph whose first sentence opens
  with a word that points back (``It``, ``They``, ``This``, ``Before that``…):
  what it refers to is not on the page.

The check reads the corpus files (the quote's place in its source, that
source's headings) and is independent of the writer's own rules: its word list
and heading reading are written here, not imported from `roles.writing`.

Reads corpus files; writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from evaluation.eval_measures import source_text
from roles.reviewing import SOURCES_HEADING, markers_in, normalize

_ATX: Final = re.compile(r"^[ ]{0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
_PLACEHOLDER: Final = re.compile(
    r"(?:source|section|part|chapter|untitled|heading|misc(?:ellaneous)?)(?:\s*#?\d+)?", re.IGNORECASE
)
_POINTS_BACK: Final = re.compile(
    r"(?:it|its|they|their|them|this|these|those|he|his|she|her|such|both|the\s+latter|the\s+former"
    r"|before\s+that|after\s+that|since\s+then|by\s+then|at\s+that\s+time)\b",
    re.IGNORECASE,
)
_OPENING_MARKS: Final = "\"'\u201c\u2018(*_ "


def incoherent(markdown: str, citations: Sequence[dict[str, Any]], corpus: Path) -> list[str]:
    """The coherence problems of a version, one line each."""
    by_marker = {str(c.get("marker")): c for c in citations}
    texts: dict[str, str | None] = {}
    problems: list[str] = []
    title, sections = _sections(markdown)
    for heading, paragraphs in sections:
        if heading is not None and _is_placeholder(heading, title):
            problems.append(f"placeholder heading {heading!r}")
        for paragraph in paragraphs:
            if _POINTS_BACK.match(paragraph.lstrip(_OPENING_MARKS)):
                problems.append(f"opens without its antecedent: {paragraph[:60]!r}")
            if heading is None:
                continue
            for marker in markers_in(paragraph):
                citation = by_marker.get(marker)
                if citation is None:
                    continue
                source = str(citation.get("source", ""))
                if source not in texts:
                    texts[source] = source_text(corpus.resolve(), source)
                under = _section_over(texts[source], str(citation.get("quote", "")))
                if under is not None and not _equal(heading, under):
                    problems.append(f"heading over other matter: {heading!r} over {marker}, under {under!r}")
    return problems


def _sections(markdown: str) -> tuple[str, list[tuple[str | None, list[str]]]]:
    """The title and the body's sections (heading or None before the first), as paragraphs."""
    title = ""
    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    lines: list[str] = []

    def flush() -> None:
        if lines:
            sections[-1][1].append(normalize(" ".join(lines)))
            lines.clear()

    for line in markdown.splitlines():
        heading = _ATX.match(line)
        if heading:
            flush()
            text = heading.group(2).strip()
            if len(heading.group(1)) == 1 and not title:
                title = text
                continue
            if text.casefold() == SOURCES_HEADING.casefold():
                break
            sections.append((text, []))
        elif not line.strip():
            flush()
        else:
            lines.append(line.strip())
    flush()
    return title, [s for s in sections if s[1] or s[0] is not None]


def _is_placeholder(heading: str, title: str) -> bool:
    return not heading.strip() or bool(_PLACEHOLDER.fullmatch(heading.strip())) or _equal(heading, title)


def _equal(a: str, b: str) -> bool:
    return " ".join(a.casefold().split()) == " ".join(b.casefold().split())


def _section_over(text: str | None, quote: str) -> str | None:
    """The section heading (level 2 or deeper) nearest above the quote's place in its source;
    None when the quote is not found or sits under the document's title alone."""
    if not text or not quote:
        return None
    at = text.find(quote)
    if at < 0:
        return None
    above = [m for m in _ATX.finditer(text, 0, at)]
    if not above or len(above[-1].group(1)) == 1:
        return None
    return above[-1].group(2).strip()


__all__ = ["incoherent"]
