"""People use cases: who the caller is, and managing users (`pressroom users …`, `whoami`).

`resolve(people, token=…, claimed=…)` is the one open/closed decision every
entry point makes (CLI, HTTP API, MCP):

- open mode (no user exists): the caller is `open_principal(claimed)` — an
  unverified name holding every role, as before people existed;
- closed mode: the caller is the user of `token`; none, an unknown or a
  revoked token is `NotAuthenticated` (exit 4 / HTTP 401). A `claimed` name,
  when given, must be the caller's (`InvalidInput`, exit 2 / HTTP 400).

`as_principal(people, actor)` turns what a use case was handed into a
principal: a `Principal` as is; a bare name only in open mode.

Managing users: the first user (open mode) must hold admin and needs no
caller; of concurrent first adds exactly one wins, the others are refused
(exit 4). After that an admin adds users and changes roles; a new token for
an existing person is issued only by that person or by an admin who holds
every role that person holds (`principals.grant_refusal`): an admin without
`reviewer` cannot mint an existing reviewer's token and approve as them.
Every token records who issued it, and every user who added them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from orchestrator.core.errors import InvalidInput, NotAuthenticated, NotFound, NotPermitted
from orchestrator.harness.principals import (
    Permission,
    Principal,
    Role,
    grant_refusal,
    normalise_name,
    open_principal,
    parse_roles,
    require,
)
from orchestrator.store.people import Issued, PeopleStore, UserView


def mode(people: PeopleStore) -> str:
    return "open" if people.is_open() else "closed"


def resolve(
    people: PeopleStore,
    *,
    token: str | None,
    claimed: str | None,
    what: str = "--as",
    default: str | None = None,
    need_name: bool = True,
) -> Principal:
    """The caller: from the claimed name in open mode, from the token in closed mode."""
    if people.is_open():
        name = (claimed or "").strip() or default
        if not name:
            if need_name:
                raise InvalidInput(f"{what} NAME is needed (open mode: no user exists yet)")
            name = "anonymous"
        try:
            return open_principal(name)
        except InvalidInput:
            raise InvalidInput(f"{what} needs a person's name (1-64 visible characters)") from None
    return closed_caller(people, token=token, claimed=claimed, what=what)


def closed_caller(people: PeopleStore, *, token: str | None, claimed: str | None, what: str) -> Principal:
    if not token:
        raise NotAuthenticated(
            "not authenticated: closed mode needs a token (PRESSROOM_TOKEN or a Bearer header)"
        )
    principal = people.authenticate(token.strip())
    if principal is None:
        raise NotAuthenticated("not authenticated: the token is unknown or revoked")
    check_claim(principal, claimed, what)
    return principal


def check_claim(principal: Principal, claimed: str | None, what: str = "--as") -> None:
    """A name given beside a verified caller must be the caller's own."""
    if claimed is None or not principal.verified:
        return
    try:
        same = normalise_name(claimed) == principal.name
    except InvalidInput:
        same = False
    if not same:
        raise InvalidInput(f"{what} {claimed!r} is not the caller: the token belongs to {principal.display}")


def as_principal(people: PeopleStore, actor: Principal | str) -> Principal:
    """A principal for a use case; a bare name is accepted in open mode only."""
    if isinstance(actor, Principal):
        return actor
    if not people.is_open():
        raise NotAuthenticated("not authenticated: closed mode needs a signed-in user, not a typed name")
    try:
        return open_principal(actor)
    except InvalidInput:
        raise InvalidInput("--as needs a person's name (1-64 visible characters)") from None


def permitted(people: PeopleStore, actor: Principal | str, permission: Permission) -> Principal:
    """The caller as a principal holding `permission` (a bare name only in open mode)."""
    return require(as_principal(people, actor), permission)


# -- users --------------------------------------------------------------------------
def add_user(people: PeopleStore, caller: Principal | None, name: str, roles: Iterable[str]) -> Issued:
    """Add a user. The first user must hold admin and needs no caller; later ones need an admin."""
    wanted = parse_roles(roles)
    if people.is_open():
        if Role.ADMIN not in wanted:
            raise InvalidInput("the first user must hold the admin role (--role admin)")
        return people.add_user(name, wanted, by=None, first=True)
    admin = require(_verified(caller), Permission.USERS)
    return people.add_user(name, wanted, by=admin.id)


def list_users(people: PeopleStore, caller: Principal | None) -> list[UserView]:
    if people.is_open():
        return []
    require(_verified(caller), Permission.USERS)
    return people.list_users()


def revoke(people: PeopleStore, caller: Principal | None, name: str) -> UserView:
    require(_verified(caller), Permission.USERS)
    return people.revoke_user(name)


def new_token(people: PeopleStore, caller: Principal | None, name: str) -> Issued:
    """A new token for NAME (replacing theirs): by NAME for themselves, or by an admin who
    holds every role NAME holds."""
    who = _verified(caller)
    if normalise_name(name) != who.name:
        require(who, Permission.USERS)
        user = people.find_user(name)
        if user is None:
            raise NotFound(f"no user named {name!r}")
        _may_grant(who, frozenset(Role(r) for r in user.roles), f"issue a token for {user.display}")
    return people.issue_token(name, by=who.id)


def set_roles(people: PeopleStore, caller: Principal | None, name: str, roles: Iterable[str]) -> UserView:
    require(_verified(caller), Permission.USERS)
    return people.set_roles(name, parse_roles(roles))


def _may_grant(admin: Principal, roles: frozenset[Role], what: str) -> None:
    why = grant_refusal(admin, roles, what=what)
    if why:
        raise NotPermitted(why, principal_id=admin.id, permission=Permission.USERS.value)


def whoami(people: PeopleStore, caller: Principal | None) -> dict[str, Any]:
    """`whoami --json`: `mode` and `user` (null in open mode)."""
    if people.is_open() or caller is None or not caller.verified:
        return {"mode": "open", "user": None}
    return {
        "mode": "closed",
        "user": {
            "name": caller.display,
            "id": caller.id,
            "roles": sorted(r.value for r in caller.roles),
            "auth": caller.auth,
        },
    }


def _verified(caller: Principal | None) -> Principal:
    if caller is None or not caller.verified:
        raise NotAuthenticated("not authenticated: closed mode needs a token (PRESSROOM_TOKEN)")
    return caller


__all__ = [
    "add_user",
    "as_principal",
    "check_claim",
    "closed_caller",
    "list_users",
    "mode",
    "new_token",
    "resolve",
    "revoke",
    "set_roles",
    "whoami",
]
