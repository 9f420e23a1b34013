"""The rules for reviewers' line comments, and the rejection note they go into (pure, no I/O).

A comment names a line of a version's markdown (1-based) and holds at most
`MAX_COMMENT` characters of text. On a rejection the head version's comments
reach the writer inside the note it is handed, which holds at most `NOTE_LIMIT`
characters (the writer's `DraftArgs.note`): the reason comes first, then one
`line N: text` entry per comment, each cut to fit; a citation marker such as
`[2]` that a cut would lose is kept after the entry, so the deterministic
writer still removes the sentences it names. Entries that do not fit at all
are counted (`(+K more comments)`). The whole comments go into the rejection's
event, not here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.core.errors import InvalidInput

MAX_COMMENT = 2000
NOTE_LIMIT = 500
ENTRY_LIMIT = 160  # the most one comment takes of the note, so several fit
_MARKER = re.compile(r"\[[1-9][0-9]*\]")


def checked_text(text: str) -> str:
    """The comment's text, stripped; InvalidInput when empty or longer than `MAX_COMMENT`."""
    body = (text or "").replace("\r\n", "\n").strip()
    if not body:
        raise InvalidInput("the comment is empty")
    if len(body) > MAX_COMMENT:
        raise InvalidInput(f"the comment is {len(body)} characters; at most {MAX_COMMENT} are kept")
    return body


def checked_line(line: int, markdown: str, version: int) -> int:
    """`line` if the version's markdown has it (1-based); InvalidInput otherwise."""
    count = len(markdown.splitlines())
    if not 1 <= line <= count:
        raise InvalidInput(f"version {version} has lines 1 to {count}; there is no line {line}")
    return line


def _cut(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    short = flat[: max(limit - 1, 0)].rstrip() + "…"
    lost = [m for m in dict.fromkeys(_MARKER.findall(flat)) if m not in short]
    if not lost:
        return short
    tail = " (names " + " ".join(lost) + ")"
    room = max(limit - len(tail) - 1, 0)
    return flat[:room].rstrip() + "…" + tail


def rejection_note(
    actor: str, reason: str, comments: Sequence[Mapping[str, Any]], limit: int = NOTE_LIMIT
) -> str:
    """The note the writer receives: the reason, then the comments as `line N: text` entries."""
    if not comments:
        return f"rejected by {actor}: {reason}"[:limit]
    head = f"rejected by {actor}: {' '.join(reason.split())}"
    # The reason keeps at most half the note when there are comments to pass on.
    head = _cut(head, min(len(head), limit // 2))
    note = head + " | comments:"
    for index, comment in enumerate(comments):
        prefix = f" line {comment['line']}: "
        left = len(comments) - index - 1
        reserve = len(f" (+{left} more comments)") if left else 0
        room = min(ENTRY_LIMIT, limit - len(note) - len(prefix) - reserve - 1)
        if room < 20:  # no useful space left for this one
            return (note + f" (+{left + 1} more comments)")[:limit]
        note += prefix + _cut(str(comment["text"]), room) + ";"
    return note[:limit]


__all__ = ["ENTRY_LIMIT", "MAX_COMMENT", "NOTE_LIMIT", "checked_line", "checked_text", "rejection_note"]
