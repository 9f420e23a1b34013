"""`pressroom prune` through the CLI on SQLite and PostgreSQL: row counts per
table before and after; a saga that is not finished keeps every row, and a
ledger row inside the reconcile window stays. On PostgreSQL, a live saga runs
to its end while a prune batch's transaction is open."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlmodel import Session

from orchestrator import retention
from orchestrator.operations import write_prune_snapshots
from tests.conftest import Cli, base_env
from tests.integration.helpers import make_app, ready_saga

TABLES = ("events", "checkpoints", "ledger", "inbox", "outbox", "work", "capability_uses")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'prune.db'}"
    return str(request.getfixturevalue("pg_url"))


def counts(db_url: str, saga_id: str) -> dict[str, int]:
    engine = create_engine(db_url)
    out = {}
    with engine.connect() as conn:
        for table in TABLES:
            if table == "inbox":
                sql = "SELECT count(*) FROM inbox WHERE message_id IN (SELECT id FROM outbox WHERE saga_id = :s)"
            else:
                sql = f"SELECT count(*) FROM {table} WHERE saga_id = :s"
            out[table] = int(conn.execute(text(sql), {"s": saga_id}).scalar_one())
    engine.dispose()
    return out


def backdate(db_url: str, saga_id: str, *, saga_days: int, ledger_days: int) -> None:
    now = datetime.now(UTC).replace(tzinfo=None)
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE sagas SET updated_at = :t WHERE id = :s"),
            {"t": now - timedelta(days=saga_days), "s": saga_id},
        )
        for sql in (
            "UPDATE ledger SET updated_at = :t WHERE saga_id = :s",
            "UPDATE capability_uses SET used_at = :t WHERE saga_id = :s",
        ):
            conn.execute(text(sql), {"t": now - timedelta(days=ledger_days), "s": saga_id})
    engine.dispose()


def test_prune_counts_and_keeps_what_it_must(db_url: str, tmp_path: Path, corpus: Path) -> None:
    cli = Cli(base_env(PRESSROOM_DATABASE_URL=db_url, PRESSROOM_BROKER_URL="inline://"), tmp_path)
    submit = ["submit", "--brief", "history of the library network", "--corpus", str(corpus), "--as", "dana"]
    done = cli.json(*submit, "--dest", f"site:{tmp_path / 'a'}")["saga_id"]
    cli.json("approve", done, "--version", "1", "--as", "erin")
    waiting = cli.json(*submit, "--dest", f"site:{tmp_path / 'b'}")["saga_id"]
    assert cli.json("status", done)["state"] == "succeeded"
    backdate(db_url, done, saga_days=30, ledger_days=3)
    backdate(db_url, waiting, saga_days=30, ledger_days=30)  # old, but not finished
    before_done, before_waiting = counts(db_url, done), counts(db_url, waiting)
    assert all(before_done[t] > 0 for t in TABLES), before_done
    assert before_waiting["events"] > 0

    dry = cli.json("prune", "--older-than", "1d", "--dry-run")
    assert dry["dry_run"] is True and dry["sagas"] == 1
    assert counts(db_url, done) == before_done, "a dry run removes nothing"
    # Ledger rows and handle uses 3 days old: inside the 7-day window.
    expected = {**before_done, "ledger": 0, "capability_uses": 0}
    assert dry["rows"] == expected

    pruned = cli.json("prune", "--older-than", "1d")
    assert pruned["rows"] == expected and pruned["total"] == sum(expected.values())
    after = counts(db_url, done)
    # One event stays: the prune snapshot, so the log still explains the saga's state.
    kept = {"ledger": before_done["ledger"], "capability_uses": before_done["capability_uses"]}
    assert after == {**dict.fromkeys(TABLES, 0), "events": 1, **kept}
    audit = cli.json("audit", "verify", done)
    assert audit["ok"] is True and audit["events"] == {
        "count": 1,
        "ok": True,
        "plain": 0,
        "schema_versions": {"2": 1},
    }, audit
    assert counts(db_url, waiting) == before_waiting, "a saga that is not finished keeps every row"
    # The saga itself, its version and its receipts stay readable.
    status = cli.json("status", done)
    assert status["state"] == "succeeded" and status["destinations"][0]["receipt"]["path"]
    assert cli.json("show", done)["version"] == 1

    # A shorter reconcile window lets the ledger rows go too.
    short = Cli({**cli.env, "PRESSROOM_RECONCILE_WINDOW": "2d"}, tmp_path)
    again = short.json("prune", "--older-than", "1d")
    assert again["rows"]["ledger"] == before_done["ledger"]
    assert again["rows"]["capability_uses"] == before_done["capability_uses"]
    assert again["total"] == before_done["ledger"] + before_done["capability_uses"]
    assert counts(db_url, done) == {**dict.fromkeys(TABLES, 0), "events": 1}  # the snapshot is not pruned
    assert counts(db_url, waiting) == before_waiting
    assert short.json("prune", "--older-than", "1d")["total"] == 0
    assert cli.json("audit", "verify", done)["ok"] is True

    bad = cli.run("prune", "--older-than", "soon")
    assert bad.returncode == 2 and "not a duration" in bad.stderr and "Traceback" not in bad.stderr


def test_prune_under_load_leaves_a_live_saga_whole(pg_url: str, tmp_path: Path, corpus: Path) -> None:
    """A saga runs from submit to succeeded inside a prune batch's transaction (its rows
    locked and deleted, not yet committed): it finishes, with every event and step; the
    prune walks old sagas that share one timestamp across batches and takes only those."""
    app = make_app(pg_url, tmp_path)

    def finished(name: str) -> str:
        saga = ready_saga(app, corpus, [f"memory:{name}"])
        app.reviews.approve(saga["saga_id"], version=saga["version"], actor="erin")
        assert app.reads.status(saga["saga_id"])["state"] == "succeeded"
        return str(saga["saga_id"])

    old = [finished(f"old-{n}") for n in range(5)]
    recent = finished("recent")
    unfinished = str(ready_saga(app, corpus, ["memory:waiting"])["saga_id"])
    engine = create_engine(pg_url)
    with engine.begin() as conn:  # one moment for all: the batches must walk ties by id
        month_ago = datetime.now(UTC) - timedelta(days=30)
        conn.execute(
            text("UPDATE sagas SET updated_at = :t WHERE id = ANY(:ids)"), {"t": month_ago, "ids": old}
        )
        conn.execute(
            text("UPDATE sagas SET updated_at = :t WHERE id = :s"), {"t": month_ago, "s": unfinished}
        )
    engine.dispose()
    kept = {sid: counts(pg_url, sid) for sid in (recent, unfinished)}

    live: dict[str, Any] = {}

    def run_live() -> None:
        saga = ready_saga(app, corpus, ["memory:live-a", "memory:live-b"])
        live["id"] = saga["saga_id"]
        app.reviews.approve(saga["saga_id"], version=saga["version"], actor="erin")
        live["done"] = True

    batches: list[list[str]] = []

    def snapshot_then_live(session: Session, ids: Sequence[str]) -> None:
        write_prune_snapshots(session, ids)
        batches.append(list(ids))
        if len(batches) == 2:  # inside this batch's open transaction
            worker = threading.Thread(target=run_live, daemon=True)
            worker.start()
            worker.join(timeout=20)
            assert live.get("done"), "the live saga waited on the prune's transaction"

    report = retention.prune(
        app.engine,
        older_than=timedelta(days=1),
        reconcile_window=timedelta(days=7),
        now=app.clock.now(),
        batch=2,
        snapshot=snapshot_then_live,
        ledger=app.store,
    )
    assert [len(b) for b in batches] == [2, 2, 1] and sorted(sum(batches, [])) == sorted(old)
    assert report.sagas == 5
    for sid in old:
        assert counts(pg_url, sid)["events"] == 1  # the prune snapshot alone
    assert {sid: counts(pg_url, sid) for sid in (recent, unfinished)} == kept

    status = app.reads.status(live["id"])
    assert status["state"] == "succeeded"
    assert [d["state"] for d in status["destinations"]] == ["done", "done"]
    events = app.reads.history(live["id"])["events"]
    assert (events[0]["kind"], events[0]["status"]) == ("saga", "submitted")
    assert not [e for e in events if e["actor"] == "retention"]
    assert counts(pg_url, live["id"])["events"] == len(events) > 10
