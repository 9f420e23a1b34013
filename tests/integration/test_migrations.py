"""Migrations through the CLI, on SQLite and PostgreSQL: `db upgrade`, `db check`,
and an install made before migrations existed, upgraded with its rows and then
used to publish a saga to the end."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import MetaData, create_engine, text

from orchestrator.store.schema import BASELINE, alembic_config, head_revision
from tests.conftest import Cli, base_env


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'migrations.db'}"
    return str(request.getfixturevalue("pg_url"))


def cli_for(db_url: str, tmp_path: Path) -> Cli:
    return Cli(base_env(PRESSROOM_DATABASE_URL=db_url, PRESSROOM_BROKER_URL="inline://"), tmp_path)


def previous_release(db_url: str) -> None:
    """The schema as the last release made it: create_all's tables, no alembic_version."""
    engine = create_engine(db_url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), BASELINE)
        conn.execute(text("DROP TABLE alembic_version"))
    engine.dispose()


def test_db_check_passes_at_head_and_fails_behind_or_drifted(db_url: str, tmp_path: Path) -> None:
    cli = cli_for(db_url, tmp_path)
    behind = cli.run("db", "check")
    assert behind.returncode == 4 and "db upgrade" in behind.stderr
    assert len(behind.stderr.strip().splitlines()) == 1
    up = cli.json("db", "upgrade")
    assert up["to"] == head_revision() and up["from"] is None and up["stamped_baseline"] is False
    assert cli.json("db", "upgrade") == {
        "from": head_revision(),
        "to": head_revision(),
        "stamped_baseline": False,
    }
    ok = cli.json("db", "check")
    assert ok["revision"] == head_revision() and ok["differences"] == []
    # A table the models have but the database lost: check says which, and changes nothing.
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE dead_letters"))
    engine.dispose()
    drifted = cli.run("db", "check")
    assert drifted.returncode == 4 and "add_table dead_letters" in drifted.stderr
    assert "Traceback" not in drifted.stderr


def test_previous_release_upgrades_with_its_rows_and_publishes(
    db_url: str, tmp_path: Path, corpus: Path
) -> None:
    previous_release(db_url)
    site = tmp_path / "site"
    markdown = "# The library network\n\nBranches opened in 1901 [1].\n"
    digest = hashlib.sha256(markdown.encode()).hexdigest()
    now = datetime.now(UTC).replace(tzinfo=None)
    engine = create_engine(db_url)
    meta = MetaData()
    meta.reflect(engine)
    with engine.begin() as conn:
        conn.execute(
            meta.tables["sagas"].insert(),
            {
                "id": "old0saga0001",
                "brief": "the library network",
                "corpus": str(corpus),
                "destinations": [f"site:{site}"],
                "state": "ready-for-review",
                "head_version": 1,
                "run": 1,
                "review_rounds": 0,
                "created_by": "dana",
                "reason": None,
                "trace_context": {},
                "ready_at": now,
                "created_at": now,
                "updated_at": now,
            },
        )
        conn.execute(
            meta.tables["versions"].insert(),
            {
                "id": "old0version1",
                "saga_id": "old0saga0001",
                "number": 1,
                "digest": digest,
                "title": "The library network",
                "author": "writer",
                "markdown": markdown,
                "citations": [],
                "evidence_digest": None,
                "review": {"verdict": "pass", "findings": []},
                "created_at": now,
            },
        )
        # The events the previous release wrote for such a saga.
        conn.execute(
            meta.tables["events"].insert(),
            [
                {
                    "event_id": "old0event000",
                    "saga_id": "old0saga0001",
                    "actor": "dana",
                    "kind": "saga",
                    "status": "submitted",
                    "detail": {},
                    "created_at": now,
                },
                {
                    "event_id": "old0event0v1",
                    "saga_id": "old0saga0001",
                    "actor": "writer",
                    "kind": "version",
                    "status": "created",
                    "detail": {"version": 1},
                    "created_at": now,
                },
                {
                    "event_id": "old0event001",
                    "saga_id": "old0saga0001",
                    "actor": "reviewer",
                    "kind": "transition",
                    "status": "ready-for-review",
                    "detail": {"event": "review_passed", "from": "preparing", "to": "ready-for-review"},
                    "created_at": now,
                },
            ],
        )
    engine.dispose()

    cli = cli_for(db_url, tmp_path)
    up = cli.json("db", "upgrade")
    assert up == {"from": None, "to": head_revision(), "stamped_baseline": True}
    assert cli.json("db", "check")["differences"] == []
    old = cli.json("status", "old0saga0001")
    assert old["state"] == "ready-for-review" and old["version_digest"] == digest
    history = [e["event_id"] for e in cli.json("history", "old0saga0001")["events"]]
    assert history == ["old0event000", "old0event0v1", "old0event001"]
    assert cli.json("audit", "verify", "old0saga0001")["ok"] is True  # the upgrade chained the old events
    cli.json("approve", "old0saga0001", "--version", "1", "--as", "erin")
    done = cli.json("status", "old0saga0001")
    assert done["state"] == "succeeded"
    page = Path(done["destinations"][0]["receipt"]["path"])
    assert hashlib.sha256(page.read_bytes()).hexdigest() == digest
    # A new saga on the upgraded schema, through the tables the upgrade added.
    new = cli.json(
        "submit",
        "--brief",
        "history of the library network",
        "--corpus",
        str(corpus),
        "--dest",
        f"site:{tmp_path / 'site2'}",
        "--as",
        "dana",
        "--request-id",
        "r-1",
    )
    assert new["state"] == "ready-for-review" and new["replayed"] is False
    cli.json("approve", new["saga_id"], "--version", str(new["version"]), "--as", "erin")
    assert cli.json("status", new["saga_id"])["state"] == "succeeded"


def test_first_use_upgrades_an_old_install_without_the_command(db_url: str, tmp_path: Path) -> None:
    previous_release(db_url)
    cli = cli_for(db_url, tmp_path)
    assert cli.json("status")["sagas"] == []
    assert cli.json("db", "check")["revision"] == head_revision()
