"""The people store on SQL: users, API tokens and web sessions, behind `PeopleStore`.

Mode: *open* while the `users` table is empty, *closed* once any user exists
(a revoked user still counts). The rules (who may add whom, which roles,
separation of duties) are in `orchestrator.harness.principals` and the use
cases in `orchestrator.people`; this module only reads and writes rows.

How other entry points use it (all methods are synchronous; run them in a
threadpool from async code)::

    people = app.people                       # a SqlPeopleStore, built by bootstrap
    people.is_open()                          # True: no user exists yet (open mode)

    # A bearer token (CLI PRESSROOM_TOKEN, HTTP Authorization, MCP) -> Principal
    principal = people.authenticate(token)    # None: unknown, revoked, or user revoked
                                              # principal.auth == "token"

    # Web sign-in: after checking the person's token with authenticate(),
    sid = people.create_session(principal, ttl_seconds=8 * 3600)   # put sid in the cookie
    people.session_principal(sid)             # Principal(auth="session") or None
                                              # (expired, ended, or the user revoked)
    people.end_session(sid)                   # sign-out

    # A trusted proxy names the person (header from PRESSROOM_TRUSTED_PROXIES only)
    people.principal_by_name(name, auth="proxy")   # None: no such active user
    people.create_session(proxy_principal, ttl_seconds=...)  # kept as auth "proxy"

`revoke_user` stops the user's tokens and sessions in the same transaction:
every lookup above also requires the user to be active, so a revoked user's
cookie or token fails on its next request. A web session made by signing in
with a token is bound to that token's row (`web_sessions.token_id`): once
`issue_token` replaces the token, the session fails too.

Adding a user holds the users table's write lock for the whole transaction
(PostgreSQL: `LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE`; SQLite: every
unit of work is `BEGIN IMMEDIATE`), so the "no user yet" check of the first
user and the look-alike check of every name see every user added before.
Every token records who issued it (`api_tokens.issued_by`, null for the first
user's own) and when (`created_at`). Only sha256 hashes of tokens and
session ids are stored; a lookup finds the row by hash and compares the hashes
again with `hmac.compare_digest`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from orchestrator.core.errors import InvalidInput, NotFound, Refused
from orchestrator.harness.principals import (
    AuthMethod,
    Principal,
    Role,
    display_name,
    new_token,
    normalise_name,
    same_look,
    token_hash,
    token_matches,
)
from orchestrator.harness.textfold import skeleton
from orchestrator.store.adapter import adapter_for
from orchestrator.store.approvers import any_user, approver_lapse, lapse_reason
from orchestrator.store.db import unit_of_work
from orchestrator.store.people_tables import TokenRow, UserRow, WebSessionRow
from orchestrator.store.tables import utcnow


@dataclass(frozen=True)
class UserView:
    id: str
    name: str
    display: str
    roles: tuple[str, ...]
    active: bool
    added_by: str | None = None  # the display name of the admin who added them (None: the first user)
    token_issued_by: str | None = None  # who issued their current token (None: at bootstrap, or unknown)
    token_issued_at: datetime | None = None

    def public(self) -> dict[str, object]:
        """The `users add/token --json` user: name, roles, active."""
        return {"name": self.display, "roles": list(self.roles), "active": self.active}

    def listed(self) -> dict[str, object]:
        """The `users list --json` shape: name, roles, active, who added them and who issued their token."""
        issued = self.token_issued_at.isoformat() if self.token_issued_at else None
        return {
            **self.public(),
            "added_by": self.added_by,
            "token": {"issued_by": self.token_issued_by, "issued_at": issued} if issued else None,
        }


@dataclass(frozen=True)
class Issued:
    """A new token for a user: shown once, never stored in clear."""

    user: UserView
    token: str

    def public(self) -> dict[str, object]:
        """The `users add --json` / `users token --json` shape: name, roles, token."""
        return {"name": self.user.display, "roles": list(self.user.roles), "token": self.token}


class PeopleStore(Protocol):
    def is_open(self) -> bool: ...
    def add_user(
        self, name: str, roles: frozenset[Role], *, by: str | None, first: bool = False
    ) -> Issued: ...
    def list_users(self) -> list[UserView]: ...
    def find_user(self, name: str) -> UserView | None: ...
    def revoke_user(self, name: str) -> UserView: ...
    def issue_token(self, name: str, *, by: str | None = None) -> Issued: ...
    def set_roles(self, name: str, roles: frozenset[Role]) -> UserView: ...
    def authenticate(self, token: str) -> Principal | None: ...
    def principal_by_name(self, name: str, auth: AuthMethod = "proxy") -> Principal | None: ...
    def create_session(self, principal: Principal, ttl_seconds: float) -> str: ...
    def session_principal(self, session_id: str) -> Principal | None: ...
    def end_session(self, session_id: str) -> None: ...


def _view(row: UserRow) -> UserView:
    ordered = tuple(r.value for r in Role if r.value in row.roles)
    return UserView(id=row.id, name=row.name, display=row.display, roles=ordered, active=row.active)


def principal_of(row: UserRow, auth: AuthMethod) -> Principal:
    return Principal(
        id=row.id,
        name=row.name,
        display=row.display,
        roles=frozenset(Role(r) for r in row.roles if r in {x.value for x in Role}),
        auth=auth,
    )


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class SqlPeopleStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def is_open(self) -> bool:
        with Session(self.engine) as s:
            return not any_user(s)

    # -- users ------------------------------------------------------------------
    def add_user(self, name: str, roles: frozenset[Role], *, by: str | None, first: bool = False) -> Issued:
        """Add a user and their first token. `first`: only while no user exists (the bootstrap
        admin); under the users lock, so of concurrent first adds exactly one wins."""
        normal = normalise_name(name)
        shape = skeleton(normal)
        token = new_token()
        try:
            with unit_of_work(self.engine) as uow:
                s = uow.session
                _lock_users(s)
                if first and any_user(s):
                    raise Refused(
                        "a user exists already (closed mode): an admin's token is needed to add one"
                    )
                for other in s.exec(select(UserRow)).all():
                    if other.skeleton == shape or same_look(name, other.display) or other.name == normal:
                        raise InvalidInput(
                            f"the name {name!r} looks like the existing user {other.display!r}"
                        )
                row = UserRow(
                    name=normal,
                    skeleton=shape,
                    display=display_name(name),
                    roles=sorted(r.value for r in roles),
                    created_by=by,
                )
                s.add(row)
                s.flush()
                s.add(TokenRow(user_id=row.id, token_hash=token_hash(token), issued_by=by))
                view = _view(row)
        except IntegrityError:
            raise InvalidInput(f"the name {name!r} is taken") from None
        return Issued(view, token)

    def list_users(self) -> list[UserView]:
        with Session(self.engine) as s:
            users = s.exec(select(UserRow).order_by(col(UserRow.created_at))).all()
            names = {u.id: u.display for u in users}
            live = s.exec(select(TokenRow).where(col(TokenRow.revoked_at).is_(None))).all()
            current = {t.user_id: t for t in sorted(live, key=lambda t: _aware(t.created_at))}
            out = []
            for u in users:
                tok = current.get(u.id)
                out.append(
                    dataclasses.replace(
                        _view(u),
                        added_by=names.get(u.created_by or ""),
                        token_issued_by=names.get(tok.issued_by or "") if tok else None,
                        token_issued_at=_aware(tok.created_at) if tok else None,
                    )
                )
            return out

    def find_user(self, name: str) -> UserView | None:
        with Session(self.engine) as s:
            row = _by_name(s, name)
            return _view(row) if row else None

    def revoke_user(self, name: str) -> UserView:
        now = utcnow()
        with unit_of_work(self.engine) as uow:
            s = uow.session
            row = _need(s, name)
            if Role.ADMIN.value in row.roles and row.active and _admins(s) == [row.id]:
                raise Refused(f"{row.display} is the last active admin; add another admin first")
            row.active = False
            row.revoked_at = row.revoked_at or now
            s.add(row)
            for tok in s.exec(select(TokenRow).where(TokenRow.user_id == row.id)).all():
                tok.revoked_at = tok.revoked_at or now
                s.add(tok)
            for ses in s.exec(select(WebSessionRow).where(WebSessionRow.user_id == row.id)).all():
                ses.revoked_at = ses.revoked_at or now
                s.add(ses)
            return _view(row)

    def issue_token(self, name: str, *, by: str | None = None) -> Issued:
        """A new token for an active user, issued by `by`; the user's earlier tokens stop
        working, and so do the web sessions signed in with them."""
        token = new_token()
        now = utcnow()
        with unit_of_work(self.engine) as uow:
            s = uow.session
            row = _need(s, name)
            if not row.active:
                raise Refused(f"{row.display} is revoked")
            for old in s.exec(select(TokenRow).where(TokenRow.user_id == row.id)).all():
                old.revoked_at = old.revoked_at or now
                s.add(old)
            s.add(TokenRow(user_id=row.id, token_hash=token_hash(token), issued_by=by))
            return Issued(_view(row), token)

    def set_roles(self, name: str, roles: frozenset[Role]) -> UserView:
        with unit_of_work(self.engine) as uow:
            s = uow.session
            row = _need(s, name)
            if not row.active:
                raise Refused(f"{row.display} is revoked")
            if Role.ADMIN not in roles and _admins(s) == [row.id]:
                raise Refused(f"{row.display} is the last active admin; add another admin first")
            row.roles = sorted(r.value for r in roles)
            s.add(row)
            return _view(row)

    # -- authentication -------------------------------------------------------------
    def authenticate(self, token: str) -> Principal | None:
        if not token:
            return None
        digest = token_hash(token)
        with Session(self.engine) as s:
            found = s.exec(
                select(TokenRow, UserRow)
                .join(UserRow, col(UserRow.id) == col(TokenRow.user_id))
                .where(col(TokenRow.token_hash) == digest)
            ).first()
            if found is None:
                return None
            tok, user = found
            if not token_matches(token, tok.token_hash) or tok.revoked_at is not None or not user.active:
                return None
            return dataclasses.replace(principal_of(user, "token"), credential=tok.id)

    def principal_by_name(self, name: str, auth: AuthMethod = "proxy") -> Principal | None:
        with Session(self.engine) as s:
            try:
                row = _by_name(s, name)
            except InvalidInput:
                return None
            return principal_of(row, auth) if row is not None and row.active else None

    def create_session(self, principal: Principal, ttl_seconds: float) -> str:
        if ttl_seconds <= 0:
            raise InvalidInput("a session needs a positive lifetime")
        session_id = new_token()
        now = utcnow()
        with unit_of_work(self.engine) as uow:
            user = uow.session.get(UserRow, principal.id)
            if user is None or not user.active:
                raise Refused(f"{principal.display} is not an active user")
            proxied = principal.auth == "proxy"
            if not proxied and principal.credential is None:
                raise Refused(f"a session for {principal.display} needs the token they signed in with")
            uow.session.add(
                WebSessionRow(
                    session_hash=token_hash(session_id),
                    user_id=user.id,
                    auth="proxy" if proxied else "session",
                    created_at=now,
                    expires_at=now + timedelta(seconds=ttl_seconds),
                    token_id=None if proxied else principal.credential,
                )
            )
        return session_id

    def session_principal(self, session_id: str) -> Principal | None:
        if not session_id:
            return None
        with Session(self.engine) as s:
            found = s.exec(
                select(WebSessionRow, UserRow)
                .join(UserRow, col(UserRow.id) == col(WebSessionRow.user_id))
                .where(col(WebSessionRow.session_hash) == token_hash(session_id))
            ).first()
            if found is None:
                return None
            ses, user = found
            if (
                not token_matches(session_id, ses.session_hash)
                or ses.revoked_at is not None
                or _aware(ses.expires_at) <= utcnow()
                or not user.active
            ):
                return None
            if ses.auth == "proxy":
                return principal_of(user, "proxy")
            # Bound to the token it was signed in with: replaced or revoked, the session ends.
            tok = s.get(TokenRow, ses.token_id) if ses.token_id else None
            if tok is None or tok.revoked_at is not None or tok.user_id != user.id:
                return None
            return dataclasses.replace(principal_of(user, "session"), credential=tok.id)

    def end_session(self, session_id: str) -> None:
        with unit_of_work(self.engine) as uow:
            row = uow.session.exec(
                select(WebSessionRow).where(col(WebSessionRow.session_hash) == token_hash(session_id))
            ).first()
            if row is not None and row.revoked_at is None:
                row.revoked_at = utcnow()
                uow.session.add(row)


def _by_name(s: Session, name: str) -> UserRow | None:
    return s.exec(select(UserRow).where(col(UserRow.name) == normalise_name(name))).first()


def _need(s: Session, name: str) -> UserRow:
    row = _by_name(s, name)
    if row is None:
        raise NotFound(f"no user named {name!r}")
    return row


def _lock_users(s: Session) -> None:
    """Hold the users table's write lock until the transaction ends (SQLite: already held)."""
    adapter_for(s).lock_users(s)


def _admins(s: Session) -> list[str]:
    rows = s.exec(select(UserRow).where(col(UserRow.active).is_(True))).all()
    return [r.id for r in rows if Role.ADMIN.value in r.roles]


__all__ = [
    "Issued",
    "PeopleStore",
    "SqlPeopleStore",
    "UserView",
    "any_user",
    "approver_lapse",
    "lapse_reason",
    "principal_of",
]
