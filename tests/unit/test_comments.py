"""The line-comment rules and the rejection note they go into (`orchestrator.comment_notes`)."""

from __future__ import annotations

import re

import pytest

from orchestrator.comment_notes import (
    ENTRY_LIMIT,
    MAX_COMMENT,
    NOTE_LIMIT,
    checked_line,
    checked_text,
    rejection_note,
)
from orchestrator.core.errors import InvalidInput


def test_a_comment_is_stripped_and_bounded() -> None:
    assert checked_text("  fix this\r\n  ") == "fix this"
    assert checked_text("x" * MAX_COMMENT) == "x" * MAX_COMMENT
    with pytest.raises(InvalidInput, match="at most 2000"):
        checked_text("x" * (MAX_COMMENT + 1))
    for empty in ("", "   ", "\n\t"):
        with pytest.raises(InvalidInput, match="empty"):
            checked_text(empty)


def test_a_comment_names_a_line_the_version_has() -> None:
    markdown = "# Title\n\nOne [1].\nTwo [2].\n"
    assert checked_line(1, markdown, 3) == 1
    assert checked_line(4, markdown, 3) == 4
    for line in (0, 5, -1, 10**12):
        with pytest.raises(InvalidInput, match="version 3 has lines 1 to 4; there is no line"):
            checked_line(line, markdown, 3)


def test_without_comments_the_note_is_the_reason_as_before() -> None:
    assert rejection_note("rita", "too  long", []) == "rejected by rita: too  long"
    assert rejection_note("rita", "x" * 900, []) == ("rejected by rita: " + "x" * 900)[:NOTE_LIMIT]


def test_comments_follow_the_reason_as_line_entries() -> None:
    note = rejection_note(
        "rita", "see my comments", [{"line": 4, "text": "[2] is wrong"}, {"line": 7, "text": "typo"}]
    )
    assert note == "rejected by rita: see my comments | comments: line 4: [2] is wrong; line 7: typo;"


def test_a_long_comment_is_cut_but_keeps_the_markers_it_names() -> None:
    text = "word " * 100 + "and drop [3] and [12] please"
    note = rejection_note("rita", "no", [{"line": 2, "text": text}])
    assert len(note) <= NOTE_LIMIT
    entry = note.split("line 2: ", 1)[1]
    assert len(entry) <= ENTRY_LIMIT + 1  # and its ';'
    assert "…" in entry and "[3]" in entry and "[12]" in entry


def test_many_comments_fill_the_note_then_are_counted() -> None:
    comments = [{"line": n, "text": f"marker [{n}] " + "blah " * 40} for n in range(1, 31)]
    note = rejection_note("rita", "r" * 2000, comments)
    assert len(note) <= NOTE_LIMIT
    assert note.startswith("rejected by rita: rrr")
    assert "…" in note.split(" | comments:")[0]  # the reason gave up room for the comments
    shown = re.findall(r"line (\d+): ", note)
    assert shown and shown == [str(n) for n in range(1, len(shown) + 1)]
    more = re.search(r"\(\+(\d+) more comments\)$", note)
    assert more is not None and int(more.group(1)) == 30 - len(shown)
    for n in shown:  # each shown entry still names its marker
        assert f"[{n}]" in note
