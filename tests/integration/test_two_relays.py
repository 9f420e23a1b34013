"""Two relays on PostgreSQL over the same 200 outbox rows, sending to Redis:
every row is sent at least once and marked sent, and a consumer applying the
messages through the inbox applies each exactly once."""

from __future__ import annotations

import threading
from datetime import timedelta

from kombu import Connection
from sqlalchemy import func
from sqlmodel import Session, col, select

from orchestrator.celery_app import make_celery
from orchestrator.core.routing import RESEARCH
from orchestrator.store.db import make_engine, unit_of_work
from orchestrator.store.outbox_tables import InboxRow, OutboxRow
from orchestrator.store.tables import utcnow
from outbox.broker import CeleryBroker
from outbox.inbox import claim
from outbox.relay import Relay

ROWS = 200


def test_two_relays_send_every_row_and_the_inbox_applies_each_once(pg_url: str, redis_url: str) -> None:
    engine = make_engine(pg_url)
    old = utcnow() - timedelta(seconds=60)
    with Session(engine) as s:
        for i in range(ROWS):
            s.add(
                OutboxRow(
                    id=f"row{i:04d}", task=RESEARCH, queue="researcher", payload={"n": i}, created_at=old
                )
            )
        s.commit()

    sends: list[str] = []
    lock = threading.Lock()

    class Counting(CeleryBroker):
        sent = 0

        def send(self, envelope):  # type: ignore[no-untyped-def]
            super().send(envelope)
            with lock:
                sends.append(envelope.message_id)
                self.sent += 1

    # Each relay has an engine (a pool of connections) and a broker client of its own, like a process.
    relays = [
        Relay(make_engine(pg_url), Counting(make_celery(redis_url), "redis"), grace=0, batch=20)
        for _ in range(2)
    ]
    for relay in relays[1:]:
        assert relay.engine is not relays[0].engine
    barrier = threading.Barrier(len(relays))
    errors: list[BaseException] = []

    def run(relay: Relay) -> None:
        try:
            barrier.wait()
            while relay.run_once():
                pass
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(r,)) for r in relays]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=100)
    assert not errors, errors
    assert set(sends) == {f"row{i:04d}" for i in range(ROWS)}, "every row sent at least once"
    assert all(relay.broker.sent > 0 for relay in relays), "both relays took rows"  # type: ignore[attr-defined]
    with Session(engine) as s:
        assert (
            s.exec(select(func.count()).select_from(OutboxRow).where(col(OutboxRow.sent_at).is_(None))).one()
            == 0
        )

    # The consumer: every message on the queue, applied through the inbox.
    applied, duplicates = 0, 0
    with Connection(redis_url) as conn:
        queue = conn.SimpleQueue("researcher")
        for _ in range(len(sends)):
            message = queue.get(timeout=10)
            message_id = message.headers["id"]
            with unit_of_work(engine) as uow:
                if claim(uow.session, message_id, "test-consumer"):
                    applied += 1
                else:
                    duplicates += 1
            message.ack()
        queue.close()
    assert applied == ROWS and applied + duplicates == len(sends)
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(InboxRow)).one() == ROWS
