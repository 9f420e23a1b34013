"""Revising a version in place: the head's own text, less what a person or a finding ruled out.

A rejection (and any redraft of text a person wrote) starts from the head
version's markdown, never from the evidence again: a person's edit survives
the writer's revision. `revise()` removes each cited sentence whose marker is
ruled out, with the markers that sentence carries; a paragraph left with no
sentence goes, and so does a section heading left with no paragraph. The
Sources list and the citations keep only the markers still in the text, and
the markers are numbered again in the order they appear, so the text reads
``[1]``, ``[2]``, … as before. Everything else, the person's words included,
is kept byte for byte.

What counts as one cited sentence: the text from the end of the previous
cited sentence up to and including a run of markers (``… in 1902. [3]`` or
``… in 1902 [3][4].``, with the punctuation right after the markers). Text
after the last marker of a paragraph stays with the paragraph.

No I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

from roles.artifacts import Citation, Draft, Finding
from roles.reviewing import MARKER_IN_TEXT, REFERENCE_LINE, SOURCE_RULES, SOURCES_HEADING, parse_blocks

_HEADING: Final = re.compile(r"^\s{0,3}(#{1,6})(?:\s+(.*?))?\s*#*\s*$")
# One cited sentence: anything, then a run of markers, then the punctuation that closes it.
_UNIT: Final = re.compile(r".*?\[[1-9][0-9]*\](?![(:\[])(?:\s*\[[1-9][0-9]*\](?![(:\[]))*[.!?,;:]?", re.S)
_CITED: Final = re.compile(r"citation (\[[1-9][0-9]*\])")
_PARAGRAPH: Final = re.compile(r"paragraph ([1-9][0-9]*)")


class NothingLeft(ValueError):
    """Every cited sentence would go: a revision would leave a version with no citation."""


def ruled_out(findings: Iterable[Finding], previous: Draft, rules: frozenset[str]) -> set[str]:
    """The markers the findings name: a citation directly, or every marker of a paragraph."""
    paragraphs = {b.number: b.text for b in parse_blocks(previous.markdown) if b.kind == "paragraph"}
    markers: set[str] = set()
    for finding in findings:
        if finding.rule not in rules and finding.rule not in SOURCE_RULES:
            continue
        if cited := _CITED.fullmatch(finding.location):
            markers.add(cited.group(1))
        elif (para := _PARAGRAPH.fullmatch(finding.location)) and int(para.group(1)) in paragraphs:
            markers.update(f"[{n}]" for n in MARKER_IN_TEXT.findall(paragraphs[int(para.group(1))]))
    return markers


def revise(previous: Draft, drop: set[str]) -> Draft:
    """`previous` without the cited sentences carrying any marker in `drop`.

    Returns `previous` itself when nothing in it is dropped. Raises `NothingLeft`
    when no cited sentence would remain.
    """
    present = {f"[{n}]" for n in MARKER_IN_TEXT.findall(_body(previous.markdown))}
    if not drop & present:
        return previous
    lines = _drop_sentences(previous.markdown.splitlines(), drop)
    kept = list(dict.fromkeys(f"[{n}]" for n in MARKER_IN_TEXT.findall(_body("\n".join(lines)))))
    if not kept:
        raise NothingLeft("no cited sentence would remain")
    renumber = {old: f"[{i}]" for i, old in enumerate(kept, start=1)}
    lines = _sources(lines, renumber)
    lines = [_renumber_line(line, renumber) for line in lines]
    markdown = "\n".join(_tidy(lines)) + ("\n" if previous.markdown.endswith("\n") else "")
    citations = tuple(
        c.model_copy(update={"marker": renumber[c.marker]})
        for c in previous.citations
        if c.marker in renumber
    )
    return Draft(title=previous.title, markdown=markdown, citations=_ordered(citations))


def _body(markdown: str) -> str:
    """The markdown above the Sources heading (where markers are cited)."""
    return "\n".join(b.text for b in parse_blocks(markdown) if b.kind == "paragraph")


def _drop_sentences(lines: Sequence[str], drop: set[str]) -> list[str]:
    """Each body paragraph without its dropped sentences; empty paragraphs and headings go."""
    out: list[str] = []
    paragraph: list[str] = []
    in_sources = False

    def flush() -> None:
        if paragraph:
            text = "\n".join(paragraph)
            out.extend(_without(text, drop).splitlines() if _names(text, drop) else paragraph)
            paragraph.clear()

    for line in lines:
        heading = _HEADING.match(line)
        if heading:
            flush()
            title = (heading.group(2) or "").strip().casefold()
            in_sources = len(heading.group(1)) == 2 and title == SOURCES_HEADING.casefold()
            out.append(line)
        elif not line.strip() or in_sources:
            flush()
            out.append(line)
        else:
            paragraph.append(line)
    flush()
    return _without_empty_sections(out)


def _names(text: str, drop: set[str]) -> bool:
    return any(f"[{n}]" in drop for n in MARKER_IN_TEXT.findall(text))


def _without(text: str, drop: set[str]) -> str:
    """The paragraph without each cited sentence that carries a dropped marker."""
    kept: list[str] = []
    end = 0
    for unit in _UNIT.finditer(text):
        end = unit.end()
        if not _names(unit.group(0), drop):
            kept.append(unit.group(0))
    tail = text[end:]  # uncited words after the last marker stay: a person may have written them
    joined = ("".join(kept) + tail).strip()
    return re.sub(r"[ \t]+\n", "\n", joined)


def _without_empty_sections(lines: list[str]) -> list[str]:
    """Drop a section heading (below the title, not Sources) whose section holds no text now."""
    out: list[str] = []
    for i, line in enumerate(lines):
        heading = _HEADING.match(line)
        if heading and len(heading.group(1)) > 1 and not _is_sources(line) and not _has_text(lines[i + 1 :]):
            continue
        out.append(line)
    return out


def _has_text(rest: Sequence[str]) -> bool:
    for line in rest:
        if _HEADING.match(line):
            return False
        if line.strip():
            return True
    return False


def _is_sources(line: str) -> bool:
    heading = _HEADING.match(line)
    title = (heading.group(2) or "").strip().casefold() if heading else ""
    return heading is not None and len(heading.group(1)) == 2 and title == SOURCES_HEADING.casefold()


def _sources(lines: list[str], renumber: dict[str, str]) -> list[str]:
    """The Sources list keeps the lines of the markers still cited, in their new order."""
    out: list[str] = []
    in_sources = False
    refs: list[tuple[int, str]] = []
    for line in lines:
        if _HEADING.match(line):
            in_sources = _is_sources(line)
            out.append(line)
            continue
        ref = REFERENCE_LINE.match(line.strip()) if in_sources else None
        if ref is None:
            out.append(line)
        elif ref.group(1) in renumber:
            refs.append((int(renumber[ref.group(1)][1:-1]), line))
            out.append("\0ref")
    ordered = iter(line for _, line in sorted(refs))
    return [next(ordered) if line == "\0ref" else line for line in out]


def _renumber_line(line: str, renumber: dict[str, str]) -> str:
    return MARKER_IN_TEXT.sub(lambda m: renumber.get(m.group(0), m.group(0)), line)


def _tidy(lines: list[str]) -> list[str]:
    """No run of blank lines where text was taken out, none at either end."""
    out: list[str] = []
    for line in lines:
        if not line.strip() and (not out or not out[-1].strip()):
            continue
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out


def _ordered(citations: tuple[Citation, ...]) -> tuple[Citation, ...]:
    return tuple(sorted(citations, key=lambda c: int(c.marker[1:-1])))


__all__ = ["NothingLeft", "revise", "ruled_out"]
