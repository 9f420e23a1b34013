"""The pure rules of people: roles → permissions, names, separation of duties, tokens."""

from __future__ import annotations

import pytest

from orchestrator.core.errors import InvalidInput, NotPermitted
from orchestrator.harness.principals import (
    ROLE_PERMISSIONS,
    Party,
    Permission,
    Principal,
    Role,
    new_token,
    normalise_name,
    open_principal,
    parse_roles,
    require,
    self_approval,
    token_hash,
    token_matches,
    tool_refusal,
)

P = Permission


def user(name: str, *roles: Role, uid: str = "u1") -> Principal:
    return Principal(id=uid, name=normalise_name(name), display=name, roles=frozenset(roles), auth="token")


def test_the_role_table_is_designs() -> None:
    assert ROLE_PERMISSIONS == {
        Role.AUTHOR: {P.SUBMIT, P.EDIT},
        Role.REVIEWER: {P.APPROVE, P.REJECT},
        Role.OPERATOR: {P.CANCEL, P.RECONCILE, P.RETRY, P.FORK, P.PRUNE, P.DEAD_LETTERS},
        Role.ADMIN: {P.USERS},
    }


@pytest.mark.parametrize("permission", [P.PRUNE, P.RETRY, P.FORK, P.DEAD_LETTERS, P.CANCEL])
def test_operator_commands_need_the_operator_role(permission: Permission) -> None:
    assert require(user("olga", Role.OPERATOR), permission).name == "olga"
    for role in (Role.AUTHOR, Role.REVIEWER, Role.ADMIN):
        with pytest.raises(NotPermitted, match="operator"):
            require(user("x", role), permission)


def test_every_authenticated_user_may_read_and_several_roles_add_up() -> None:
    nobody = user("nobody")
    assert nobody.may(P.READ) and not nobody.may(P.SUBMIT)
    both = user("bo", Role.AUTHOR, Role.REVIEWER)
    assert both.may(P.SUBMIT) and both.may(P.APPROVE) and not both.may(P.USERS)


def test_tool_calls_need_the_role_of_what_they_do() -> None:
    reviewer = user("erin", Role.REVIEWER)
    assert tool_refusal(reviewer, "saga.status") is None
    assert tool_refusal(reviewer, "saga.submit") is not None
    assert tool_refusal(reviewer, "publish") is not None
    assert tool_refusal(user("olga", Role.OPERATOR), "publish") is None
    assert tool_refusal(None, "publish") is None  # the saga's own agent: capabilities decide


@pytest.mark.parametrize("alias", ["Bob", "bob\u200b", "\uff42\uff4f\uff42", "b\u043eb", " BOB "])
def test_open_mode_aliases_are_one_person(alias: str) -> None:
    bob = open_principal("bob")
    assert open_principal(alias).id == bob.id
    assert open_principal(alias).auth == "open" and not open_principal(alias).verified
    assert self_approval(open_principal(alias), [Party(None, "bob", "submitted the saga")])
    assert open_principal("rob").id != bob.id


def test_separation_of_duties_by_id_and_by_look() -> None:
    erin = user("erin", Role.REVIEWER, uid="id-erin")
    assert self_approval(erin, [Party("id-dana", "dana", "submitted the saga")]) is None
    assert "wrote version 2" in (
        self_approval(erin, [Party("id-erin", "Erin Renamed", "wrote version 2")]) or ""
    )
    assert self_approval(erin, [Party(None, "\u0435rin", "wrote version 1")])  # Cyrillic e, free text
    assert self_approval(erin, [Party(None, "writer", "wrote version 1")]) is None


def test_names_are_folded_and_bounded() -> None:
    assert normalise_name("  Erin\u200b  Smith ") == "erin smith"
    for bad in ("", "\u200b\u200d", "x" * 65):
        with pytest.raises(InvalidInput):
            normalise_name(bad)


def test_roles_are_parsed_strictly() -> None:
    assert parse_roles(["Reviewer", "author"]) == {Role.REVIEWER, Role.AUTHOR}
    for bad in ([], ["root"], ["reviewer", "god"]):
        with pytest.raises(InvalidInput):
            parse_roles(bad)


def test_tokens_are_long_random_and_kept_as_hashes() -> None:
    a, b = new_token(), new_token()
    assert a != b and a.startswith("pr_") and len(a) >= 40
    stored = token_hash(a)
    assert a not in stored and len(stored) == 64
    assert token_matches(a, stored) and not token_matches(b, stored)
