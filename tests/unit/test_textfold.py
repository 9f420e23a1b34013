"""fold() and skeleton(): one person under every spelling a reader cannot tell apart."""

from __future__ import annotations

import pytest

from orchestrator.harness.textfold import fold, skeleton

ALIASES = ["Bob", "bob\u200b", "\uff42\uff4f\uff42", "b\u043eb", "\u200dB\u00adO\ufe0fb\U000e0062"]


@pytest.mark.parametrize("alias", ALIASES)
def test_every_alias_has_bobs_skeleton(alias: str) -> None:
    assert skeleton(alias) == skeleton("bob")


def test_fold_removes_invisibles_and_width_and_case() -> None:
    assert fold("Bob") == "bob"
    assert fold("bob\u200b") == "bob"
    assert fold("\uff42\uff4f\uff42") == "bob"
    assert fold("\u202eb\u200eo\u2066b\u2069") == "bob"  # bidi override, mark and isolates
    assert fold("STRASSE") == fold("straße")


def test_fold_keeps_visible_letters_of_other_scripts() -> None:
    assert fold("b\u043eb") == "b\u043eb"
    assert fold("b\u043eb") != fold("bob")


def test_different_names_keep_different_skeletons() -> None:
    assert skeleton("bob") != skeleton("rob")
    assert skeleton("erin") != skeleton("erik")


def test_classic_confusables_collapse() -> None:
    assert skeleton("paypal") == skeleton("p\u0430yp\u0430l")  # Cyrillic a
    assert skeleton("rn") == skeleton("m")
    assert skeleton("l") == skeleton("1") == skeleton("|")
    assert skeleton("\u0131") == skeleton("i")  # dotless i
    # fold runs first: a capital I is the letter i before its skeleton is taken
    assert skeleton("I") == skeleton("i")


def test_skeleton_is_idempotent_on_its_own_output() -> None:
    for text in ["bob", "b\u043eb", "Alice \u0391lice", "m", "\u2160"]:
        once = skeleton(text)
        assert skeleton(once) == once
