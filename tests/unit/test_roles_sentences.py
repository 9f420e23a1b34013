"""Sentence-level support, pure: splitting, markers after full stops, support by quote."""

from __future__ import annotations

import pytest

from roles.sentences import claims, states_something, supports

pytestmark = pytest.mark.unit

QUOTE = "The Central Library opened in 1901 on Main Street."


def test_a_marker_after_the_full_stop_belongs_to_the_sentence_before() -> None:
    found = claims("The library opened in 1901. [1] It grew fast [2]. The robots came. Then more [3] [4]")
    assert [(c.number, c.text, c.markers) for c in found] == [
        (1, "The library opened in 1901.", ("[1]",)),
        (2, "It grew fast.", ("[2]",)),
        (3, "The robots came.", ()),
        (4, "Then more", ("[3]", "[4]")),
    ]


def test_support_needs_the_quote_words_and_numbers() -> None:
    assert supports([QUOTE], QUOTE)
    assert supports([QUOTE], "The Central Library opened on Main Street in 1901.")
    assert supports([QUOTE, "Its libraries lent books."], "Libraries opened on Main Street.")
    assert not supports([QUOTE], "The library owns ten million robots.")
    assert not supports([QUOTE], "The Central Library opened in 1911 on Main Street.")
    assert not supports([], QUOTE)


def test_questions_and_wordless_lines_state_nothing() -> None:
    assert states_something("The library owns ten million robots.")
    assert not states_something("Why does it matter?")
    assert not states_something("---")
