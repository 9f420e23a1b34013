"""Events of every schema version in one database, on SQLite and PostgreSQL.

A saga is prepared, then the database is taken back to revision 0012 and the
saga's events are linked as the release at 0012 linked them (its writer's
rule: the link over `HASHED_FIELDS`, keyed); that is the database a deployment
upgrades. After the upgrade (migration 0013) those events are version 1, as is
one a process of that release writes while the upgrade rolls out (it names
only the columns it knows); the upgraded release approves and publishes,
writing version 2. The reducer gives the same state before and after the
upgrade, `audit verify` passes over the mixed chain, and rewriting the
version of any event breaks the chain.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from sqlalchemy.engine import Engine

from orchestrator import audit
from orchestrator.harness.event_chain import EVENT_SCHEMA, HASHED_FIELDS, LEGACY_SCHEMA, keyed_event_hash
from orchestrator.store.chain_keys import key_of
from orchestrator.store.db import dispose_all, make_engine
from orchestrator.store.schema import alembic_config, head_revision, upgrade
from orchestrator.store.tables import new_id, utcnow
from sagas.reducer import LoggedEvent, SagaView, reduce
from tests.integration.helpers import make_app, ready_saga

PREVIOUS_HEAD = "0012"


def _events(columns: tuple[str, ...]) -> sa.TableClause:
    """The events table as a release that knows `columns` (and seq and the link) sees it."""
    kinds: dict[str, Any] = {"detail": sa.JSON, "seq": sa.Integer, "schema_version": sa.Integer}
    names = ("seq", *columns, "prev_hash", "hash")
    return sa.table(
        "events",
        *(sa.column(n, kinds.get(n, sa.DateTime if n.endswith("_at") else sa.String)) for n in names),
    )


OLD_EVENTS = _events(HASHED_FIELDS)
EVENTS = _events((*HASHED_FIELDS, "schema_version"))


def rows(engine: Engine, saga_id: str) -> list[dict[str, Any]]:
    table = (
        EVENTS
        if "schema_version" in {c["name"] for c in sa.inspect(engine).get_columns("events")}
        else OLD_EVENTS
    )
    with engine.connect() as conn:
        found = conn.execute(sa.select(table).where(table.c.saga_id == saga_id).order_by(table.c.seq))
        return [dict(r) for r in found.mappings()]


def reduced(engine: Engine, saga_id: str) -> SagaView:
    return reduce(
        LoggedEvent(
            seq=r["seq"],
            kind=r["kind"],
            status=r["status"],
            detail=r["detail"] or {},
            schema_version=r.get("schema_version", LEGACY_SCHEMA),
        )
        for r in rows(engine, saga_id)
    )


def link_as_previous_release(engine: Engine, key: bytes, saga_id: str) -> None:
    """Re-link the saga's events by the rule of the release at 0012 (as its writer did)."""
    with engine.begin() as conn:
        prev = "0" * 64
        for row in rows(engine, saga_id):
            digest = keyed_event_hash(key, prev, {n: row[n] for n in HASHED_FIELDS})
            conn.execute(
                sa.update(OLD_EVENTS)
                .where(OLD_EVENTS.c.seq == row["seq"])
                .values(prev_hash=prev, hash=digest)
            )
            prev = digest


def write_as_previous_release(engine: Engine, key: bytes, saga_id: str) -> None:
    """An event a process of the release at 0012 writes after the upgrade: the INSERT names
    only the columns it knows, and its link is that release's."""
    head = rows(engine, saga_id)[-1]["hash"]
    fields: dict[str, Any] = {n: None for n in HASHED_FIELDS}
    fields.update(
        event_id=new_id(),
        saga_id=saga_id,
        actor="erin",
        kind="comment",
        status="added",
        detail={"version": 1, "line": 1},
        created_at=utcnow().replace(tzinfo=None),
    )
    with engine.begin() as conn:
        conn.execute(
            sa.insert(OLD_EVENTS).values(**fields, prev_hash=head, hash=keyed_event_hash(key, head, fields))
        )


def set_version(engine: Engine, seq: int, version: int) -> None:
    with engine.begin() as conn:
        conn.execute(sa.update(EVENTS).where(EVENTS.c.seq == seq).values(schema_version=version))


def test_a_saga_of_the_previous_release_reads_and_verifies_alongside_new_events(
    either_db_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(either_db_url, tmp_path)
    key = key_of(app.engine)
    saga = ready_saga(app, corpus, [f"site:{tmp_path / 'site'}"])
    sid = saga["saga_id"]
    dispose_all()

    # The database as the release at 0012 left it, holding this saga.
    engine = make_engine(either_db_url, upgrade=False)
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), PREVIOUS_HEAD)
    link_as_previous_release(engine, key, sid)
    before = reduced(engine, sid)
    assert before.state.value == "ready-for-review" and before.head_version == saga["version"]

    with engine.begin() as conn:  # what every process of this release does on first use
        assert upgrade(conn).after == head_revision()
    engine.dispose()
    write_as_previous_release(engine, key, sid)  # an old process, still running
    old = rows(engine, sid)
    assert {r["schema_version"] for r in old} == {LEGACY_SCHEMA}
    assert reduced(engine, sid) == before
    report = audit.verify(engine, sid, key=key)
    assert report["ok"], report["problems"]
    assert report["events"]["schema_versions"] == {"1": len(old)}

    app = make_app(either_db_url, tmp_path)
    history = app.reads.history(sid)["events"]
    assert [e["schema_version"] for e in history] == [LEGACY_SCHEMA] * len(old)
    app.reviews.approve(sid, version=saga["version"], actor="erin")
    assert app.reads.status(sid)["state"] == "succeeded"
    mixed = rows(engine, sid)
    new = mixed[len(old) :]
    assert new and {r["schema_version"] for r in new} == {EVENT_SCHEMA}
    assert [e["schema_version"] for e in app.reads.history(sid)["events"]] == [
        r["schema_version"] for r in mixed
    ]
    report = audit.verify(engine, sid, key=key)
    assert report["ok"], report["problems"]
    assert report["events"]["schema_versions"] == {"1": len(old), "2": len(new)}
    assert report["state"]["derived"]["state"] == "succeeded"

    # Rewriting the version of an event, either way, breaks its link; so does a version
    # this release does not know.
    for event, forged in ((new[0], LEGACY_SCHEMA), (old[0], EVENT_SCHEMA), (new[-1], 3)):
        set_version(engine, event["seq"], forged)
        report = audit.verify(engine, sid, key=key)
        assert not report["ok"] and not report["events"]["ok"], forged
        assert report["problems"][0].startswith(f"event chain: event {event['seq']} ("), report["problems"]
        set_version(engine, event["seq"], event["schema_version"])
    assert "schema version 3 is not one this release knows" in report["problems"][0]
    assert audit.verify(engine, sid, key=key)["ok"]
    engine.dispose()
