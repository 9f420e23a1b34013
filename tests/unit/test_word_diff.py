"""The side-by-side word diff of the reviewers' diff page (orchestrator.entrypoints.web.word_diff)."""

from __future__ import annotations

from orchestrator.entrypoints.web.word_diff import Piece, side_by_side, summary, tokens, word_pair


def test_tokens_give_the_line_back() -> None:
    line = "The library, founded in 1901 [2], has   three branches."
    assert "".join(tokens(line)) == line
    assert tokens("a, b") == ["a", ",", " ", "b"]


def test_only_the_changed_words_are_marked_on_each_side() -> None:
    left, right = word_pair("The library has three branches.", "The library has four branches.")
    assert left == (Piece("The library has ", False), Piece("three", True), Piece(" branches.", False))
    assert right == (Piece("The library has ", False), Piece("four", True), Piece(" branches.", False))


def test_lines_only_one_side_has_stand_alone() -> None:
    rows = side_by_side("a\nb\nc\n", "a\nb\nnew line\nc\n")
    kinds = [row.kind for row in rows]
    assert kinds == ["equal", "equal", "insert", "equal"]
    inserted = rows[2]
    assert inserted.left is None and inserted.right is not None
    assert inserted.right.number == 3 and inserted.right.text == "new line"
    assert [r.left.number for r in rows if r.left] == [1, 2, 3]
    assert [r.right.number for r in rows if r.right] == [1, 2, 3, 4]


def test_a_changed_line_is_paired_and_word_diffed() -> None:
    rows = side_by_side("# Title\n\nOld words here.\n", "# Title\n\nNew words here.\nExtra.\n")
    changed = [row for row in rows if row.kind == "change"]
    assert len(changed) == 1
    assert changed[0].left is not None and changed[0].right is not None
    assert [p for p in changed[0].left.pieces if p.changed] == [Piece("Old", True)]
    assert [p for p in changed[0].right.pieces if p.changed] == [Piece("New", True)]
    assert rows[-1].kind == "insert" and rows[-1].right is not None and rows[-1].right.text == "Extra."
    counted = summary(rows)
    assert (counted.added_words, counted.removed_words, counted.changed_lines) == (2, 1, 2)


def test_long_unchanged_runs_are_folded_around_the_changes() -> None:
    old = "\n".join(f"line {n}" for n in range(1, 41))
    new = old.replace("line 20", "line twenty")
    rows = side_by_side(old, new, context=2)
    kinds = [row.kind for row in rows]
    assert kinds == ["fold", "equal", "equal", "change", "equal", "equal", "fold"]
    assert rows[0].folded == 17 and rows[-1].folded == 18
    assert sum(row.folded for row in rows) + 5 == 40


def test_equal_texts_are_all_equal_rows_and_markup_stays_one_piece() -> None:
    assert [row.kind for row in side_by_side("x\ny", "x\ny")] == ["equal", "equal"]
    left, right = word_pair("# Title", '# Edited <script>alert("x")</script>')
    assert "".join(p.text for p in right if p.changed) == 'Edited <script>alert("x")</script>'
    assert left[-1] == Piece("Title", True)


def test_the_workspace_layout_modules_import_no_adapters() -> None:
    """word_diff, timeline and source_context are pure: no database, broker or HTTP module."""
    import subprocess
    import sys

    from tests.unit.test_pure_imports import FORBIDDEN

    code = (
        "import sys\nimport orchestrator.entrypoints.web.word_diff, orchestrator.entrypoints.web.timeline, orchestrator.entrypoints.web.source_context\n"
        f"print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
