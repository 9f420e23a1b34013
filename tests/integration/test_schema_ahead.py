"""A database a later release upgraded, met by this release's processes (a rolling
upgrade: the schema first, then each process): on SQLite and PostgreSQL a command of this
release starts on it, publishes a saga, and leaves the revision as it is; `db upgrade`
says so and changes nothing; `db check` names the later revision."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from orchestrator.store.db import make_engine
from orchestrator.store.schema import head_revision
from tests.conftest import Cli, base_env

LATER = "9001"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ahead.db'}"
    return str(request.getfixturevalue("pg_url"))


def one(db_url: str, sql: str, **params: str) -> str:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return str(conn.execute(text(sql), params).scalar_one())
    finally:
        engine.dispose()


def revision(db_url: str) -> str:
    return one(db_url, "SELECT version_num FROM alembic_version")


def test_this_release_runs_on_a_later_releases_schema(db_url: str, tmp_path: Path, corpus: Path) -> None:
    # At this release's head (set up in-process), then what a later release's additive
    # migration does: a column with a server default, a table, its revision.
    engine = make_engine(db_url)
    with engine.begin() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == head_revision()
        conn.execute(text("ALTER TABLE events ADD COLUMN added_later INTEGER NOT NULL DEFAULT 1"))
        conn.execute(text("CREATE TABLE added_later (id INTEGER PRIMARY KEY)"))
        conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": LATER})
    engine.dispose()

    cli = Cli(base_env(PRESSROOM_DATABASE_URL=db_url, PRESSROOM_BROKER_URL="inline://"), tmp_path)
    saga = cli.json(
        "submit",
        "--brief",
        "history of the library network",
        "--corpus",
        str(corpus),
        "--dest",
        f"site:{tmp_path / 'site'}",
        "--as",
        "dana",
    )
    assert saga["state"] == "ready-for-review"
    cli.json("approve", saga["saga_id"], "--version", str(saga["version"]), "--as", "erin")
    assert one(db_url, "SELECT state FROM sagas WHERE id = :id", id=saga["saga_id"]) == "succeeded"
    assert revision(db_url) == LATER

    assert cli.json("db", "upgrade") == {"from": LATER, "to": LATER, "stamped_baseline": False, "ahead": True}
    check = cli.run("db", "check")
    assert check.returncode == 4 and f"revision {LATER}, a later release's" in check.stderr
    assert len(check.stderr.strip().splitlines()) == 1
    assert revision(db_url) == LATER
