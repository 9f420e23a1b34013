"""The people store on SQLite and PostgreSQL: users, tokens, web sessions, revocation."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.core.errors import InvalidInput, NotFound, Refused
from orchestrator.harness.principals import Role
from orchestrator.store.db import make_engine
from orchestrator.store.people import SqlPeopleStore


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SqlPeopleStore:
    url = (
        f"sqlite:///{tmp_path / 'db.sqlite'}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    return SqlPeopleStore(make_engine(url))


def test_open_until_the_first_user(store: SqlPeopleStore) -> None:
    assert store.is_open()
    issued = store.add_user("Admin", frozenset({Role.ADMIN}), by=None)
    assert not store.is_open()
    principal = store.authenticate(issued.token)
    assert principal is not None and principal.name == "admin" and principal.auth == "token"
    assert store.authenticate(issued.token + "x") is None and store.authenticate("") is None


def test_lookalike_names_are_refused_revoked_ones_too(store: SqlPeopleStore) -> None:
    store.add_user("admin", frozenset({Role.ADMIN}), by=None)
    store.add_user("bob", frozenset({Role.AUTHOR}), by=None)
    store.revoke_user("bob")
    for alias in ("Bob", "bob\u200b", "\uff42\uff4f\uff42", "b\u043eb"):
        with pytest.raises(InvalidInput, match="looks like"):
            store.add_user(alias, frozenset({Role.REVIEWER}), by=None)


def test_sessions_live_until_expiry_sign_out_or_revoke(store: SqlPeopleStore) -> None:
    store.add_user("admin", frozenset({Role.ADMIN}), by=None)
    erin = store.add_user("erin", frozenset({Role.REVIEWER}), by=None)
    principal = store.authenticate(erin.token)
    assert principal is not None
    sid = store.create_session(principal, ttl_seconds=3600)
    seen = store.session_principal(sid)
    assert seen is not None and seen.id == principal.id and seen.auth == "session"
    store.end_session(sid)
    assert store.session_principal(sid) is None
    proxy = store.principal_by_name("Erin", auth="proxy")
    assert proxy is not None and proxy.auth == "proxy"
    via_proxy = store.create_session(proxy, ttl_seconds=3600)
    assert (store.session_principal(via_proxy) or proxy).auth == "proxy"
    kept = store.create_session(principal, ttl_seconds=3600)
    store.revoke_user("erin")  # tokens and sessions stop at once
    assert store.authenticate(erin.token) is None
    assert store.session_principal(kept) is None and store.session_principal(via_proxy) is None
    assert store.principal_by_name("erin") is None
    with pytest.raises(Refused):
        store.create_session(principal, ttl_seconds=60)


def test_tokens_rotate_and_roles_change(store: SqlPeopleStore) -> None:
    store.add_user("admin", frozenset({Role.ADMIN}), by=None)
    first = store.add_user("erin", frozenset({Role.REVIEWER}), by=None)
    second = store.issue_token("erin")
    assert store.authenticate(first.token) is None and store.authenticate(second.token) is not None
    store.set_roles("erin", frozenset({Role.AUTHOR}))
    again = store.authenticate(second.token)
    assert again is not None and again.roles == {Role.AUTHOR}
    with pytest.raises(Refused):
        store.set_roles("admin", frozenset({Role.AUTHOR}))
    with pytest.raises(NotFound):
        store.issue_token("nobody")
    assert [u.public() for u in store.list_users()] == [
        {"name": "admin", "roles": ["admin"], "active": True},
        {"name": "erin", "roles": ["author"], "active": True},
    ]
