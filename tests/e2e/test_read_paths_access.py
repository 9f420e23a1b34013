"""Closed mode: `status` and `show` refuse and answer the same on the quick SQLite path
and on the store's full path (`tests.support.read_paths`). The people and sagas are
made in this process; the `users` commands have their own tests
(`tests/e2e/test_people_cli.py`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.support import in_process
from tests.support.read_paths import Db, same, submit

# Every check runs the full path's cold start again (seconds each on a busy machine).
pytestmark = pytest.mark.timeout(900)


def _closed(tmp_path: Path) -> tuple[Db, str, dict[str, str]]:
    """A saga submitted in open mode, then `admin` (roles: admin, reviewer) and rex,
    a reviewer: the database, the saga and the tokens by name."""
    db = Db(tmp_path)
    sid = submit(db, "closed")
    tokens = in_process.add_people(
        db.env(), db.root, {"rex": ["reviewer"]}, admin_roles=("admin", "reviewer")
    )
    return db, sid, tokens


def test_closed_mode_is_as_strict_on_both_paths(tmp_path: Path) -> None:
    db, sid, tokens = _closed(tmp_path)
    reader = tokens["rex"]
    for args in (["status", "--json"], ["status", sid, "--json"], ["show", sid, "--json"]):
        assert same(db, *args).returncode == 4  # no token
        assert same(db, *args, PRESSROOM_TOKEN="pr_" + "x" * 43).returncode == 4  # unknown
        assert same(db, *args, PRESSROOM_TOKEN=reader).returncode == 0
        assert same(db, *args, PRESSROOM_TOKEN=f"  {reader} ").returncode == 0  # stripped, as before


def test_a_revoked_or_inactive_user_is_refused_on_both_paths(tmp_path: Path) -> None:
    db, sid, tokens = _closed(tmp_path)
    admin, reader = tokens["admin"], tokens["rex"]
    assert db.run("users", "revoke", "rex", PRESSROOM_TOKEN=admin).returncode == 0
    for args in (["status", "--json"], ["show", sid]):
        assert same(db, *args, PRESSROOM_TOKEN=reader).returncode == 4  # revoked
    # A token whose hash is stored but whose user row is inactive is refused by the quick path too.
    assert same(db, "status", "--json", PRESSROOM_TOKEN=admin).returncode == 0
    with sqlite3.connect(tmp_path / "pressroom.db") as conn:
        conn.execute("UPDATE users SET active = 0 WHERE name = 'admin'")
    assert same(db, "status", "--json", PRESSROOM_TOKEN=admin).returncode == 4
