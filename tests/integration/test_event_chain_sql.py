"""The event chain under concurrency, on SQLite and PostgreSQL: writers of one saga's events
in separate transactions take turns (the saga row lock on PostgreSQL, the write lock on
SQLite), so the chain never forks; a fork could not be stored anyway."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from orchestrator.harness.event_chain import CHAIN_FIELDS, EVENT_SCHEMA, first_broken, keyed_event_hash
from orchestrator.store.chain_keys import key_of
from orchestrator.store.db import make_engine, unit_of_work
from orchestrator.store.events import add_event, insert_event
from orchestrator.store.harness_store import SqlHarnessStore
from orchestrator.store.tables import EventRow, SagaRow, utcnow
from orchestrator.store.work import claim_lease, new_work
from outbox.inbox import settle

WRITERS, EACH = 6, 8


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    url = (
        f"sqlite:///{tmp_path / 'chain.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    eng = make_engine(url)
    yield eng
    eng.dispose()


def new_saga(engine: Engine) -> str:
    with unit_of_work(engine) as uow:
        saga = SagaRow(brief="b", corpus="c", destinations=["site:/x"], state="preparing", created_by="dana")
        uow.session.add(saga)
        uow.session.flush()
        add_event(uow.session, saga_id=saga.id, actor="dana", kind="saga", status="submitted")
        return saga.id


def chain_of(engine: Engine, saga_id: str) -> list[EventRow]:
    with Session(engine) as s:
        return list(s.exec(select(EventRow).where(EventRow.saga_id == saga_id).order_by(col(EventRow.seq))))


def run_all(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)


def assert_one_chain(rows: list[EventRow], key: bytes) -> None:
    links = [(r.prev_hash, r.hash, {n: getattr(r, n) for n in CHAIN_FIELDS}) for r in rows]
    assert first_broken(links, key) is None
    assert len({r.prev_hash for r in rows}) == len(rows)  # no event has two successors


def test_concurrent_writers_of_one_saga_never_fork_its_chain(engine: Engine) -> None:
    saga_id = new_saga(engine)
    other = new_saga(engine)
    store = SqlHarnessStore(engine)
    start = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            start.wait()
            for i in range(EACH):
                if i % 2:
                    store.record_event(
                        saga_id=saga_id, actor=f"w{n}", kind="message", status="x", detail={"i": i}
                    )
                    continue
                # Several events in one transaction, both writers mixed, and another saga between.
                with unit_of_work(engine) as uow:
                    add_event(uow.session, saga_id=saga_id, actor=f"w{n}", kind="note", status="a")
                    add_event(uow.session, saga_id=other, actor=f"w{n}", kind="note", status="a")
                    add_event(uow.session, saga_id=saga_id, actor=f"w{n}", kind="note", status="a2")
                    insert_event(
                        uow.session, saga_id=saga_id, actor=f"w{n}", kind="note", status="b", detail={}
                    )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    run_all([threading.Thread(target=write, args=(n,)) for n in range(WRITERS)])
    assert errors == []
    rows = chain_of(engine, saga_id)
    assert len(rows) == 1 + WRITERS * (EACH // 2) * 4
    assert_one_chain(rows, key_of(engine))
    assert_one_chain(chain_of(engine, other), key_of(engine))


def test_on_postgresql_a_second_writer_waits_for_the_first(request: pytest.FixtureRequest) -> None:
    """Not luck: while one transaction holds the saga's chain head, another writer blocks on the lock."""
    eng = make_engine(request.getfixturevalue("pg_url"))
    try:
        saga_id = new_saga(eng)
        store = SqlHarnessStore(eng)
        done = threading.Event()
        with unit_of_work(eng) as first:
            add_event(first.session, saga_id=saga_id, actor="first", kind="note", status="a")
            first.session.flush()
            second = threading.Thread(
                target=lambda: (
                    store.record_event(saga_id=saga_id, actor="second", kind="note", status="b"),
                    done.set(),
                )
            )
            second.start()
            waiting = 0
            for _ in range(600):  # up to ~30 s under load: the second writer reaches the lock and waits
                with eng.connect() as conn:
                    waiting = conn.execute(
                        text(
                            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
                        )
                    ).scalar_one()
                if waiting:
                    break
                done.wait(0.05)
            assert waiting == 1 and not done.is_set()
        second.join(timeout=60)
        assert done.is_set()
        rows = chain_of(eng, saga_id)
        assert [r.actor for r in rows] == ["dana", "first", "second"]
        assert_one_chain(rows, key_of(eng))
    finally:
        eng.dispose()


def test_a_fork_cannot_be_stored(engine: Engine) -> None:
    saga_id = new_saga(engine)
    head = chain_of(engine, saga_id)[-1]
    for n in range(2):
        fields = {
            "event_id": uuid.uuid4().hex,
            "saga_id": saga_id,
            "actor": f"f{n}",
            "kind": "note",
            "status": "x",
            "detail": {},
            "created_at": utcnow(),
            "schema_version": EVENT_SCHEMA,
        }
        row = EventRow(
            **fields, prev_hash=head.hash, hash=keyed_event_hash(key_of(engine), head.hash, fields)
        )
        if n == 0:
            with unit_of_work(engine) as uow:
                uow.session.add(row)
        else:
            with pytest.raises(IntegrityError), unit_of_work(engine) as uow:
                uow.session.add(row)


def _held_work(engine: Engine, saga_id: str, holder: str) -> str:
    with unit_of_work(engine) as uow:
        row = new_work(uow.session, saga_id=saga_id, task="roles.write", queue="writer", payload={}, lease=60)
        uow.session.flush()
        assert claim_lease(uow.session, row.id, holder, 60) == 1
        return row.id


def test_an_event_the_server_links_in_a_consumers_settle_joins_the_chain(engine: Engine) -> None:
    """`settle` with its event: on PostgreSQL the server takes the chain and hashes the link
    (`ChainedEvent`); racing other writers, the chain stays one, each link verifies with
    `keyed_event_hash`, and what the transaction writes next chains onto the server's link."""
    saga_id = new_saga(engine)
    store = SqlHarnessStore(engine)
    works = [(f"m-{uuid.uuid4().hex}", n) for n in range(WRITERS)]
    held = {message_id: _held_work(engine, saga_id, message_id) for message_id, _ in works}
    start = threading.Barrier(WRITERS + 1)
    errors: list[BaseException] = []

    def consume(message_id: str, n: int) -> None:
        try:
            start.wait()
            with unit_of_work(engine) as uow:
                settled = settle(
                    uow.session,
                    message_id,
                    "writer",
                    work_id=held[message_id],
                    saga_id=saga_id,
                    event={
                        "actor": f"c{n}",
                        "kind": "message",
                        "status": "applied",
                        "detail": {"n": n, "é": "✓"},
                    },
                )
                assert settled == "applied"
                add_event(uow.session, saga_id=saga_id, actor=f"c{n}", kind="note", status="after")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def record() -> None:
        try:
            start.wait()
            for i in range(EACH):
                store.record_event(saga_id=saga_id, actor="r", kind="note", status="x", detail={"i": i})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    run_all([threading.Thread(target=consume, args=w) for w in works] + [threading.Thread(target=record)])
    assert errors == []
    rows = chain_of(engine, saga_id)
    assert len(rows) == 1 + 2 * WRITERS + EACH
    assert_one_chain(rows, key_of(engine))
    for n in range(WRITERS):  # each consumer's two events are next to each other, the applied one first
        mine = [r.status for r in rows if r.actor == f"c{n}"]
        assert mine == ["applied", "after"]
        first = next(i for i, r in enumerate(rows) if r.actor == f"c{n}")
        assert rows[first + 1].actor == f"c{n}"
    with unit_of_work(engine) as uow:  # a copy of an applied message writes no event
        again = settle(
            uow.session,
            works[0][0],
            "writer",
            work_id=held[works[0][0]],
            saga_id=saga_id,
            event={"actor": "copy", "kind": "message", "status": "applied"},
        )
        assert again == "duplicate"
        uow.session.rollback()
    assert len(chain_of(engine, saga_id)) == len(rows)


def test_on_postgresql_a_result_waits_for_the_saga_before_it_locks_its_ledger_row(
    request: pytest.FixtureRequest,
) -> None:
    """An effect's result takes the saga's lock, its ledger outcome and its event in one
    statement: while another transaction holds the saga, the result waits holding nothing,
    so the ledger row stays free for that transaction (an intent of the same key takes the
    saga, then the row). Locking the row first, the two would deadlock."""
    from orchestrator.store.events import hold_chain
    from orchestrator.store.tables import LedgerRow
    from tests.integration.helpers import wait_for_a_lock_wait

    eng = make_engine(request.getfixturevalue("pg_url"))
    try:
        saga_id = new_saga(eng)
        key = f"k-{uuid.uuid4().hex}"
        with unit_of_work(eng) as uow:
            uow.session.add(
                LedgerRow(key=key, tool="publish", saga_id=saga_id, args_digest="d", status="pending")
            )
        store = SqlHarnessStore(eng)
        errors: list[BaseException] = []

        def result() -> None:
            try:
                store.finish_effect(
                    key=key,
                    ledger_status="done",
                    result={"ok": True},
                    event={"saga_id": saga_id, "actor": "publisher", "kind": "tool_call", "status": "ok"},
                )
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        recorder = threading.Thread(target=result)
        with unit_of_work(eng) as holder:
            hold_chain(holder.session, saga_id)
            recorder.start()
            wait_for_a_lock_wait(eng, "the result to wait for the saga")
            row = holder.session.connection().execute(
                text("SELECT status FROM ledger WHERE key = :k FOR UPDATE NOWAIT"), {"k": key}
            )
            assert row.scalar_one() == "pending"  # not locked by the waiting result
        recorder.join(timeout=30)
        assert errors == []
        with Session(eng) as s:
            done = s.get(LedgerRow, key)
            assert done is not None and done.status == "done" and done.result == {"ok": True}
        rows = chain_of(eng, saga_id)
        assert [r.status for r in rows] == ["submitted", "ok"]
        assert rows[-1].event_id == done.event_id
        assert_one_chain(rows, key_of(eng))
    finally:
        eng.dispose()
