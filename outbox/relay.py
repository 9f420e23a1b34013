"""The relay: unsent outbox rows → broker, at least once.

PostgreSQL: rows are claimed with `FOR UPDATE SKIP LOCKED`, so several relays
may run side by side. SQLite: run one relay. A broker outage is met with
exponential backoff; rows stay unsent until the broker takes them, so nothing
is lost. The relay also runs the sweepers that recover work whose lease ran
out (the database, not the broker, holds the truth about work in flight).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta

from sqlalchemy import Table, bindparam, select, update
from sqlalchemy.engine import Engine

from orchestrator.store.db import is_postgres, relaxed_commit, unit_of_work
from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.tables import utcnow
from outbox.broker import Broker, BrokerUnavailable
from outbox.messages import Envelope
from outbox.writer import MARK_SENT
from telemetry import metrics, propagation

log = logging.getLogger(__name__)

Sweeper = Callable[[], int]

# Core statements built once (the relay reads and marks whole batches).
_OUTBOX: Table = OutboxRow.__table__  # type: ignore[attr-defined]
_UNSENT = (
    select(
        _OUTBOX.c.id,
        _OUTBOX.c.task,
        _OUTBOX.c.queue,
        _OUTBOX.c.payload,
        _OUTBOX.c.headers,
        _OUTBOX.c.created_at,
    )
    .where(_OUTBOX.c.sent_at.is_(None), _OUTBOX.c.created_at <= bindparam("cutoff"))
    .order_by(_OUTBOX.c.created_at)
)
_REFUSED = (
    update(_OUTBOX)
    .where(_OUTBOX.c.id == bindparam("row_id"))
    .values(send_attempts=_OUTBOX.c.send_attempts + 1, last_error=bindparam("error"))
)


class Relay:
    def __init__(
        self,
        engine: Engine,
        broker: Broker,
        *,
        grace: float = 2.0,
        poll: float = 1.0,
        batch: int = 100,
        sweepers: Sequence[Sweeper] = (),
        max_backoff: float = 30.0,
    ) -> None:
        self.engine = engine
        self.broker = broker
        self.grace = grace
        self.poll = poll
        self.batch = batch
        self.sweepers = list(sweepers)
        self.max_backoff = max_backoff
        self.failures = 0

    def run_once(self) -> int:
        """Send one batch of rows older than the grace period; the count sent.

        One transaction per batch: the rows are read (PostgreSQL: claimed with
        `FOR UPDATE SKIP LOCKED`), sent one by one, and every row the broker
        took is marked sent with one `UPDATE` at the end (relaxed commit: a
        mark lost to a crash means the row is sent again and deduplicated by
        the consumer's inbox). A broker refusal stops the batch; that row's
        attempt and error are recorded in the same transaction.
        """
        cutoff = utcnow() - timedelta(seconds=self.grace)
        query = _UNSENT.limit(self.batch)
        if is_postgres(str(self.engine.url)):
            query = query.with_for_update(skip_locked=True)
        sent: list[str] = []
        with unit_of_work(self.engine) as uow:
            conn = uow.session.connection()
            for row in conn.execute(query, {"cutoff": cutoff}).all():
                env = Envelope(
                    message_id=row.id,
                    task=row.task,
                    queue=row.queue,
                    payload=row.payload,
                    headers=row.headers,
                )
                try:
                    with propagation.send_span(
                        env.queue, env.message_id, self.broker.system, env.headers, {}
                    ):
                        self.broker.send(env)
                except BrokerUnavailable as exc:
                    conn.execute(_REFUSED, {"row_id": row.id, "error": str(exc)[:500]})
                    self.failures += 1
                    log.warning("broker unavailable (%d): %s", self.failures, exc)
                    break
                metrics.record_outbox_lag((utcnow() - row.created_at).total_seconds(), row.queue)
                sent.append(row.id)
                self.failures = 0
            if sent:
                conn.execute(MARK_SENT, {"ids": sent, "now": utcnow()})
                relaxed_commit(uow.session)
        return len(sent)

    def sweep(self) -> int:
        recovered = 0
        for sweeper in self.sweepers:
            try:
                recovered += sweeper()
            except Exception:
                log.exception("sweeper failed; will try again")
        return recovered

    def backoff(self) -> float:
        if self.failures == 0:
            return self.poll
        return float(min(self.max_backoff, self.poll * 2 ** min(self.failures, 10)))

    def run_forever(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                sent = self.run_once()
                self.sweep()
            except Exception:
                log.exception("relay pass failed; backing off")
                self.failures += 1
                sent = 0
            if sent < self.batch:
                stop.wait(self.backoff())


__all__ = ["BrokerUnavailable", "Relay", "Sweeper"]
