"""A web session is bound to the token it was signed in with (SQLite and PostgreSQL)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from sqlalchemy import text

from orchestrator.core.errors import Refused
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


def test_a_replaced_token_or_an_unbound_session_signs_nobody_in(store: SqlPeopleStore) -> None:
    store.add_user("admin", frozenset(Role), by=None, first=True)
    erin = store.add_user("erin", frozenset({Role.REVIEWER}), by=None)
    principal = store.authenticate(erin.token)
    assert principal is not None and principal.credential is not None
    sid = store.create_session(principal, ttl_seconds=3600)
    assert store.session_principal(sid) is not None
    store.issue_token("erin")
    assert store.session_principal(sid) is None  # the token it was made with is gone

    fresh = store.authenticate(store.issue_token("erin").token)
    assert fresh is not None
    kept = store.create_session(fresh, ttl_seconds=3600)
    with store.engine.begin() as conn:  # a session from before sessions were bound to a token
        conn.execute(text("UPDATE web_sessions SET token_id = NULL"))
    assert store.session_principal(kept) is None
    with pytest.raises(Refused, match="needs the token"):
        store.create_session(dataclasses.replace(fresh, credential=None), ttl_seconds=60)
