"""The pure rules behind the hostile-caller fixes: look-alike keys, grants, bounded numbers,
and how an MCP message with an oversized integer is re-spelt. No services."""

from __future__ import annotations

import json

import pytest

from orchestrator.core.errors import InvalidInput
from orchestrator.entrypoints.mcp_json import OVERSIZED, REFUSED_METHOD, mark_duplicates, oversized_answer
from orchestrator.entrypoints.web.http_support import MAX_WHOLE, whole_number
from orchestrator.harness.principals import (
    Party,
    Principal,
    Role,
    grant_refusal,
    open_principal,
    same_look,
    self_approval,
)
from orchestrator.harness.textfold import cased_skeleton, lookalike_keys, skeleton

ALICES = [
    "aIice",
    "AIice",
    "ALICE",
    "Alice",
    "\u0430lice",
    "a\u0399ice",
    "\uff41\uff29\uff49\uff43\uff45",
    "ali\u200bce",
]
BIG = "9" * 5000


@pytest.mark.parametrize("alias", ALICES)
def test_every_spelling_of_alice_looks_like_alice(alias: str) -> None:
    assert same_look(alias, "alice") and same_look("alice", alias)


def test_capital_letter_rules_apply_before_case_is_folded() -> None:
    # the old single key folded first, so a capital I became i and never l
    assert skeleton("aIice") != skeleton("alice")
    assert cased_skeleton("aIice") == skeleton("alice")
    assert same_look("b0b", "bob")  # digit zero: the capital O rule
    assert lookalike_keys("alice") == {skeleton("alice")}


@pytest.mark.parametrize(("a", "b"), [("bob", "rob"), ("erin", "erik"), ("alice", "alina"), ("ivan", "lvan")])
def test_different_names_stay_apart(a: str, b: str) -> None:
    assert not same_look(a, b)


@pytest.mark.parametrize("alias", ALICES)
def test_separation_of_duties_uses_the_same_comparison(alias: str) -> None:
    assert self_approval(open_principal(alias), [Party(None, "alice", "submitted the saga")])
    user = Principal(id="u-1", name="alice", display="alice", roles=frozenset({Role.REVIEWER}), auth="token")
    assert self_approval(user, [Party(None, alias, "wrote version 2")])
    assert self_approval(user, [Party(None, "erin", "wrote version 2")]) is None


def test_open_mode_ids_keep_their_meaning() -> None:
    # ids recorded before stay the same: made from the folded skeleton, as before
    assert open_principal("Bob").id == open_principal("bob").id == open_principal("b\u043eb").id


def test_an_admin_grants_only_roles_they_hold() -> None:
    ada = Principal(
        id="a", name="ada", display="ada", roles=frozenset({Role.ADMIN, Role.AUTHOR}), auth="token"
    )
    assert grant_refusal(ada, {Role.AUTHOR}, what="add dan") is None
    why = grant_refusal(ada, {Role.AUTHOR, Role.REVIEWER}, what="add mal")
    assert why is not None and "reviewer" in why and "author" not in why.split(":")[1]


@pytest.mark.parametrize(
    "text", ["", " ", "-1", "1.0", "\u00b2", "\u0661", BIG, str(MAX_WHOLE + 1), "1" * 11]
)
def test_whole_numbers_from_outside_are_bounded(text: str) -> None:
    with pytest.raises(InvalidInput, match="whole number"):
        whole_number(text, "limit")


def test_whole_numbers_in_range_pass() -> None:
    assert whole_number("0", "n") == 0 and whole_number(f" {MAX_WHOLE} ", "n") == MAX_WHOLE


def test_an_mcp_request_with_an_oversized_integer_becomes_a_refusal_with_its_id() -> None:
    call = (
        f'{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"x","arguments":{{"v":{BIG}}}}}}}'
    )
    marked = mark_duplicates(call)
    assert marked is not None
    assert json.loads(marked) == {
        "jsonrpc": "2.0",
        "id": 5,
        "method": REFUSED_METHOD,
        "params": {"reason": OVERSIZED},
    }
    # with a duplicate key as well, still refused, not a crash
    both = f'{{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{{"a":1,"a":{BIG}}}}}'
    assert json.loads(mark_duplicates(both) or "{}")["method"] == REFUSED_METHOD
    # nothing to answer: a notification, or an id that is itself the oversized number
    assert mark_duplicates(f'{{"jsonrpc":"2.0","method":"notifications/x","params":{{"v":{BIG}}}}}') is None
    assert mark_duplicates(f'{{"jsonrpc":"2.0","id":{BIG},"method":"ping"}}') is None
    assert oversized_answer(f'{{"jsonrpc":"2.0","id":{BIG},"method":"ping"}}')["id"] is None
    assert (
        mark_duplicates('{"jsonrpc":"2.0","id":1,"method":"ping"}')
        == '{"jsonrpc":"2.0","id":1,"method":"ping"}'
    )
