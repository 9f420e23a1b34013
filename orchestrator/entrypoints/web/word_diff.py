"""A side-by-side, word-level diff of two texts, for the reviewers' diff page. Pure: no I/O.

`side_by_side(old, new)` pairs the lines of the two texts with the standard
library's `difflib.SequenceMatcher` and, inside each pair of changed lines,
marks the words that differ (a word is a run of letters and digits, a run of
white space, or a run of other characters). Each `Row` holds a left and a
right `Line` (either may be None: a line only one side has); a `Line` is a
list of `Piece`s whose `changed` flag says whether that text differs.

Runs of more than `2 * context + 1` unchanged lines are folded into one row
with `folded` set to how many lines it stands for, so a long document shows
its changes with `context` lines around each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Final, Literal

_TOKEN: Final = re.compile(r"\w+|\s+|[^\w\s]+")

Kind = Literal["equal", "change", "delete", "insert", "fold"]


@dataclass(frozen=True)
class Piece:
    text: str
    changed: bool


@dataclass(frozen=True)
class Line:
    number: int  # 1-based line number in its text
    pieces: tuple[Piece, ...]

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.pieces)


@dataclass(frozen=True)
class Row:
    kind: Kind
    left: Line | None = None
    right: Line | None = None
    folded: int = 0  # for a `fold` row: how many unchanged lines it hides


@dataclass(frozen=True)
class Summary:
    added_words: int
    removed_words: int
    changed_lines: int


def tokens(line: str) -> list[str]:
    """A line as words, white space and punctuation runs; joined they give the line back."""
    return _TOKEN.findall(line)


def _merge(pieces: list[Piece]) -> tuple[Piece, ...]:
    merged: list[Piece] = []
    for piece in pieces:
        if not piece.text:
            continue
        if merged and merged[-1].changed == piece.changed:
            merged[-1] = Piece(merged[-1].text + piece.text, piece.changed)
        else:
            merged.append(piece)
    return tuple(merged)


def word_pair(old: str, new: str) -> tuple[tuple[Piece, ...], tuple[Piece, ...]]:
    """The two lines' pieces, with the words that differ marked on each side."""
    a, b = tokens(old), tokens(new)
    left: list[Piece] = []
    right: list[Piece] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            left.append(Piece("".join(a[i1:i2]), False))
            right.append(Piece("".join(b[j1:j2]), False))
        else:
            left.append(Piece("".join(a[i1:i2]), True))
            right.append(Piece("".join(b[j1:j2]), True))
    return _merge(left), _merge(right)


def _whole(number: int, text: str, changed: bool) -> Line:
    return Line(number, _merge([Piece(text, changed)]))


def _rows(old_lines: list[str], new_lines: list[str]) -> list[Row]:
    rows: list[Row] = []
    matcher = SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            for k in range(i2 - i1):
                rows.append(
                    Row(
                        "equal",
                        _whole(i1 + k + 1, old_lines[i1 + k], False),
                        _whole(j1 + k + 1, new_lines[j1 + k], False),
                    )
                )
        elif op == "delete":
            rows += [Row("delete", left=_whole(i + 1, old_lines[i], True)) for i in range(i1, i2)]
        elif op == "insert":
            rows += [Row("insert", right=_whole(j + 1, new_lines[j], True)) for j in range(j1, j2)]
        else:  # replace: pair the lines in order, word-diff each pair, the rest stand alone
            pairs = min(i2 - i1, j2 - j1)
            for k in range(pairs):
                left, right = word_pair(old_lines[i1 + k], new_lines[j1 + k])
                rows.append(Row("change", Line(i1 + k + 1, left), Line(j1 + k + 1, right)))
            rows += [Row("delete", left=_whole(i + 1, old_lines[i], True)) for i in range(i1 + pairs, i2)]
            rows += [Row("insert", right=_whole(j + 1, new_lines[j], True)) for j in range(j1 + pairs, j2)]
    return rows


def _fold(rows: list[Row], context: int) -> list[Row]:
    out: list[Row] = []
    run: list[Row] = []

    def flush(at_start: bool, at_end: bool) -> None:
        head = 0 if at_start else context
        tail = 0 if at_end else context
        if len(run) > head + tail + 1:
            out.extend(run[:head])
            out.append(Row("fold", folded=len(run) - head - tail))
            out.extend(run[len(run) - tail :])
        else:
            out.extend(run)
        run.clear()

    for row in rows:
        if row.kind == "equal":
            run.append(row)
            continue
        flush(at_start=not out, at_end=False)
        out.append(row)
    flush(at_start=not out, at_end=True)
    return out


def side_by_side(old: str, new: str, *, context: int = 3) -> list[Row]:
    """The rows of a side-by-side diff; unchanged runs folded beyond `context` lines.

    Two equal texts give every line as `equal` (nothing to fold around).
    """
    rows = _rows(old.splitlines(), new.splitlines())
    if all(row.kind == "equal" for row in rows):
        return rows
    return _fold(rows, context)


def summary(rows: list[Row]) -> Summary:
    """How many words were added and removed, and how many rows changed."""

    def words(line: Line | None) -> int:
        if line is None:
            return 0
        return sum(len(re.findall(r"\w+", p.text)) for p in line.pieces if p.changed)

    changed = [row for row in rows if row.kind in ("change", "delete", "insert")]
    return Summary(
        added_words=sum(words(row.right) for row in changed),
        removed_words=sum(words(row.left) for row in changed),
        changed_lines=len(changed),
    )


__all__ = ["Line", "Piece", "Row", "Summary", "side_by_side", "summary", "tokens", "word_pair"]
