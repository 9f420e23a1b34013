"""Section headings a reader can trust: the source's own, or the brief's words, never a placeholder.

`outline(text)` lists a source file's markdown headings with their offsets;
`heading_at(outline, offset)` is the heading a sentence at that offset sits
under in its source. The writer groups a source's quoted sentences by that
heading, so a section heading in a draft is the heading the sentences carried
where they were written. `usable(heading, …)` refuses a heading that would
mislead: one that repeats the title or the Sources heading, reads as an
instruction, or is a generic placeholder. `from_brief(…)` names a section by
the brief's terms its sentences hold, for a source with no heading of its own.

No I/O here.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from typing import Final

from roles.injection import assess
from roles.ranking import query_terms

Outline = tuple[tuple[int, int, str], ...]  # (offset, level, text), in source order

_HEADING_LINE: Final = re.compile(r"^[ ]{0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
_WORD: Final = re.compile(r"[^\W_][\w'\u2019-]*")
# Headings that name no subject: a reader learns nothing from them.
PLACEHOLDER: Final = re.compile(
    r"(?:source|section|part|chapter|untitled|notes?|misc(?:ellaneous)?|other|more|details?)"
    r"(?:\s+\d+)?",
    re.IGNORECASE,
)
MAX_HEADING_CHARS: Final = 80


def outline(text: str) -> Outline:
    """The markdown (ATX) headings of a source, with where each starts."""
    return tuple((m.start(), len(m.group(1)), m.group(2).strip()) for m in _HEADING_LINE.finditer(text))


def heading_at(found: Outline, offset: int) -> str | None:
    """The heading a sentence at `offset` sits under: the nearest one before it (the
    document's own title when no section heading comes first)."""
    index = bisect_right([start for start, _, _ in found], offset)
    return found[index - 1][2] if index else None


def words(text: str) -> tuple[str, ...]:
    return tuple(w.casefold() for w in _WORD.findall(text))


def usable(heading: str | None, *, avoid: Sequence[str]) -> bool:
    """A heading that names its section: not empty, not a placeholder, not an echo of
    `avoid` (the title, the Sources heading), not an instruction, not too long."""
    if not heading or len(heading) > MAX_HEADING_CHARS or not words(heading):
        return False
    if PLACEHOLDER.fullmatch(heading.strip()):
        return False
    if words(heading) in {words(a) for a in avoid}:
        return False
    return not assess(heading)


def from_brief(brief: str, quotes: Sequence[str], *, avoid: Sequence[str]) -> str | None:
    """The brief's terms (up to three, in the brief's order) that the quotes hold, title-cased;
    None when they hold none, or the result would echo `avoid`."""
    held = set(query_terms(" ".join(quotes)))
    terms = [t for t in query_terms(brief) if t in held][:3]
    if not terms:
        return None
    heading = " ".join(t[:1].upper() + t[1:] for t in terms)
    return heading if usable(heading, avoid=avoid) else None


__all__ = ["Outline", "PLACEHOLDER", "from_brief", "heading_at", "outline", "usable", "words"]
