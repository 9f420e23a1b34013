"""Principals, roles and permissions: the pure rules of who may do what. No I/O.

- `Principal`: the typed caller every entry point hands on (never a bare
  name): `id`, normalised `name`, `display` name, `roles` and `auth` (how it
  was authenticated: ``token``, ``session``, ``proxy``, ``open``).
- `Role` → `Permission` is DESIGN.md's table: author (submit, edit), reviewer
  (approve, reject), operator (cancel, reconcile, retry, fork, prune, dead
  letters), admin (users). `require(principal, permission)` is the one check;
  read commands need `Permission.READ`, which every authenticated principal has.
- Open mode (no user exists): `open_principal(name)` holds every role and is
  marked ``open``; its id is derived from the name's confusable skeleton, so
  ``Bob``, ``bob``+U+200B, ``ｂｏｂ`` and Cyrillic ``bоb`` are one person.
- Separation of duties: `self_approval(approver, people)` says why an approver
  may not approve, comparing principal ids and the names' look-alike keys
  (`textfold.lookalike_keys`: case folded, and UTS #39 skeletons taken both
  before and after case folding, so a capital ``I`` for an ``l`` is caught).
  `same_look(a, b)` is that one comparison; `users add` uses it too.
- Tokens: `new_token()` (``pr_`` + 43 url-safe characters, 256 bits),
  `token_hash()` (sha256; what the store keeps), `token_matches()` (constant time).
- `acting(principal)` / `current_principal()`: the principal behind the events
  written inside a block (the store stamps each event with it).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from orchestrator.core.errors import InvalidInput, NotPermitted
from orchestrator.harness.textfold import fold, lookalike_keys, skeleton

AuthMethod = Literal["token", "session", "proxy", "open"]
TOKEN_PREFIX = "pr_"
MAX_NAME = 64


class Role(StrEnum):
    AUTHOR = "author"
    REVIEWER = "reviewer"
    OPERATOR = "operator"
    ADMIN = "admin"


class Permission(StrEnum):
    READ = "read"  # status, show, diff, history, trace, whoami
    SUBMIT = "submit"
    EDIT = "edit"
    APPROVE = "approve"
    REJECT = "reject"
    CANCEL = "cancel"
    RECONCILE = "reconcile"
    RETRY = "retry"
    FORK = "fork"
    PRUNE = "prune"
    DEAD_LETTERS = "dead-letters"
    USERS = "users"


ROLE_PERMISSIONS: dict[Role, frozenset[Permission]] = {
    Role.AUTHOR: frozenset({Permission.SUBMIT, Permission.EDIT}),
    Role.REVIEWER: frozenset({Permission.APPROVE, Permission.REJECT}),
    Role.OPERATOR: frozenset(
        {
            Permission.CANCEL,
            Permission.RECONCILE,
            Permission.RETRY,
            Permission.FORK,
            Permission.PRUNE,
            Permission.DEAD_LETTERS,
        }
    ),
    Role.ADMIN: frozenset({Permission.USERS}),
}

# What a person needs to call a tool (MCP). A tool not named here needs only
# READ; capabilities and approvals still apply on top. The saga's own agents
# call tools with no principal and are governed by their capabilities alone.
TOOL_PERMISSIONS: dict[str, Permission] = {
    "saga.submit": Permission.SUBMIT,
    "draft.write": Permission.EDIT,
    "review.record": Permission.REJECT,
    "publish": Permission.RETRY,
    "publish.compensate": Permission.CANCEL,
    "publish.status": Permission.RECONCILE,
}


@dataclass(frozen=True)
class Principal:
    """A caller Pressroom knows: who, holding which roles, authenticated how."""

    id: str
    name: str
    display: str
    roles: frozenset[Role] = field(default_factory=frozenset)
    auth: AuthMethod = "open"
    # The id of the api_tokens row it was authenticated with (auth "token" and
    # "session"): a web session is bound to it, so a new token ends the session.
    credential: str | None = field(default=None, compare=False)

    @property
    def permissions(self) -> frozenset[Permission]:
        granted = {Permission.READ}
        for role in self.roles:
            granted |= ROLE_PERMISSIONS[role]
        return frozenset(granted)

    def may(self, permission: Permission) -> bool:
        return permission in self.permissions

    @property
    def verified(self) -> bool:
        return self.auth != "open"


def require(principal: Principal, permission: Permission) -> Principal:
    """The principal, if it holds `permission`; `NotPermitted` (exit 4 / HTTP 403) otherwise."""
    if not principal.may(permission):
        holders = sorted(r.value for r, perms in ROLE_PERMISSIONS.items() if permission in perms)
        raise NotPermitted(
            f"{principal.display} may not {permission.value}: it needs the role {' or '.join(holders)}",
            principal_id=principal.id,
            permission=permission.value,
        )
    return principal


def grant_refusal(granter: Principal, roles: Iterable[Role], *, what: str) -> str | None:
    """Why `granter` may not act with `roles` (issue a new token for a person who holds
    them), or None: an admin acts as nobody with a role the admin does not hold."""
    missing = sorted(r.value for r in set(roles) - granter.roles)
    if not missing:
        return None
    return (
        f"{granter.display} may not {what}: the role {', '.join(missing)} is not one "
        f"{granter.display} holds (an admin acts as nobody with a role they lack)"
    )


def tool_permission(tool: str) -> Permission:
    return TOOL_PERMISSIONS.get(tool, Permission.READ)


def tool_refusal(principal: Principal | None, tool: str) -> str | None:
    """Why `principal` may not call `tool`, or None; None principal = the saga's own agent."""
    if principal is None:
        return None
    needed = tool_permission(tool)
    if principal.may(needed):
        return None
    return f"{principal.display} may not call {tool}: it needs the {needed.value} permission"


# -- names ----------------------------------------------------------------------
def normalise_name(name: str) -> str:
    """The stored, compared form of a person's name: folded, spaces collapsed."""
    folded = " ".join(fold(name or "").split())
    if not folded or len(folded) > MAX_NAME:
        raise InvalidInput(f"a name needs 1-{MAX_NAME} visible characters")
    if any(not (ch.isprintable()) for ch in folded):
        raise InvalidInput("a name must be printable text")
    return folded


def display_name(name: str) -> str:
    """The name as written (NFKC: no fullwidth or styled letters), without invisible characters."""
    visible = "".join(ch for ch in name if fold(ch) or ch.isspace())
    return " ".join(unicodedata.normalize("NFKC", visible).split()) or normalise_name(name)


def name_skeleton(name: str) -> str:
    return skeleton(normalise_name(name))


def name_keys(name: str) -> frozenset[str]:
    """The look-alike keys of a person's name as written (see `textfold.lookalike_keys`)."""
    return lookalike_keys(" ".join(name.split()))


def same_look(a: str, b: str) -> bool:
    """Whether two names are one person to a reader (case, width, invisibles, confusables)."""
    return not name_keys(a).isdisjoint(name_keys(b))


def parse_roles(values: Iterable[str]) -> frozenset[Role]:
    wanted = [v.strip().lower() for v in values if v.strip()]
    known = {r.value for r in Role}
    unknown = sorted(set(wanted) - known)
    if unknown:
        raise InvalidInput(f"unknown role {', '.join(unknown)}; roles are {', '.join(r.value for r in Role)}")
    if not wanted:
        raise InvalidInput("give at least one --role (author, reviewer, operator, admin)")
    return frozenset(Role(v) for v in wanted)


def open_principal(name: str) -> Principal:
    """An unverified caller in open mode: every role, an id from the name's skeleton."""
    normal = normalise_name(name)
    digest = hashlib.sha256(skeleton(normal).encode()).hexdigest()[:24]
    return Principal(
        id=f"open:{digest}", name=normal, display=display_name(name), roles=frozenset(Role), auth="open"
    )


# -- separation of duties -----------------------------------------------------------
@dataclass(frozen=True)
class Party:
    """Someone who took part in a saga: its submitter or a version's author."""

    principal_id: str | None
    name: str
    what: str  # "submitted the saga", "wrote version 2"


def self_approval(approver: Principal, parties: Iterable[Party]) -> str | None:
    """Why `approver` may not approve, or None: same principal id, or a name that
    looks the same (`same_look`) as a submitter's or an author's."""
    mine = name_keys(approver.display) | name_keys(approver.name)
    for party in parties:
        same_id = party.principal_id is not None and party.principal_id == approver.id
        same_name = not mine.isdisjoint(name_keys(party.name))
        if same_id or same_name:
            return f"{approver.display} {party.what} and cannot approve it"
    return None


# -- tokens ---------------------------------------------------------------------
def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_matches(token: str, stored_hash: str) -> bool:
    return hmac.compare_digest(token_hash(token), stored_hash)


def looks_like_token(token: str) -> bool:
    return token.startswith(TOKEN_PREFIX) and 20 <= len(token) <= 200


# -- who is acting ------------------------------------------------------------------
_ACTING: ContextVar[Principal | None] = ContextVar("pressroom_acting", default=None)


def current_principal() -> Principal | None:
    """The principal whose request is being served in this context (None: the system)."""
    return _ACTING.get()


@contextmanager
def acting(principal: Principal | None) -> Iterator[None]:
    token = _ACTING.set(principal)
    try:
        yield
    finally:
        _ACTING.reset(token)


__all__ = [
    "ROLE_PERMISSIONS",
    "TOKEN_PREFIX",
    "TOOL_PERMISSIONS",
    "AuthMethod",
    "Party",
    "Permission",
    "Principal",
    "Role",
    "acting",
    "current_principal",
    "display_name",
    "grant_refusal",
    "looks_like_token",
    "name_keys",
    "name_skeleton",
    "new_token",
    "normalise_name",
    "open_principal",
    "parse_roles",
    "require",
    "same_look",
    "self_approval",
    "token_hash",
    "token_matches",
    "tool_permission",
    "tool_refusal",
]
