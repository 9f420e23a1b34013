"""Where a citation's quote sits in its source, with the lines around it. Pure: no I/O.

`quote_context(text, quote, around=2)` finds the verbatim quote in the
source text (or, failing that, the quote with its white space collapsed, as
a quote spread over several source lines reads in one paragraph) and
returns the source lines it covers plus `around` lines either side, each as
`ContextLine(number, pieces)` where a piece is `(text, in_quote)`. None when
the quote is not in the source (the reviewer reports that as
`quote-not-verbatim`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_LINE_CHARS = 600


@dataclass(frozen=True)
class ContextLine:
    number: int  # 1-based
    pieces: tuple[tuple[str, bool], ...]


def _find(text: str, quote: str) -> tuple[int, int] | None:
    at = text.find(quote)
    if at >= 0:
        return at, at + len(quote)
    words = quote.split()
    if not words:
        return None
    pattern = r"\s+".join(re.escape(w) for w in words)
    found = re.search(pattern, text)
    return (found.start(), found.end()) if found else None


def quote_context(text: str, quote: str, around: int = 2) -> list[ContextLine] | None:
    """The quote's lines with `around` lines either side, the quote marked; None if absent."""
    span = _find(text, quote)
    if span is None:
        return None
    start, end = span
    lines = text.splitlines(keepends=True)
    offsets = []
    at = 0
    for line in lines:
        offsets.append(at)
        at += len(line)
    first = max(i for i, o in enumerate(offsets) if o <= start)
    last = max(i for i, o in enumerate(offsets) if o < end) if end > start else first
    out: list[ContextLine] = []
    for index in range(max(first - around, 0), min(last + around, len(lines) - 1) + 1):
        line = lines[index].rstrip("\r\n")
        begin = offsets[index]
        lo = min(max(start - begin, 0), len(line))
        hi = min(max(end - begin, 0), len(line))
        pieces = [(line[:lo], False), (line[lo:hi], True), (line[hi:], False)]
        kept = tuple((t[:MAX_LINE_CHARS], marked) for t, marked in pieces if t)
        out.append(ContextLine(index + 1, kept))
    return out


__all__ = ["ContextLine", "quote_context"]
