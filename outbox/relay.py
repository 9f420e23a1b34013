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

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from orchestrator.store.db import is_postgres, unit_of_work
from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.tables import utcnow
from outbox.broker import Broker, BrokerUnavailable
from outbox.writer import envelope_of
from telemetry import metrics, propagation

log = logging.getLogger(__name__)

Sweeper = Callable[[], int]


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
        """Send one batch of rows older than the grace period; the count sent."""
        cutoff = utcnow() - timedelta(seconds=self.grace)
        sent = 0
        with unit_of_work(self.engine) as uow:
            query = (
                select(OutboxRow)
                .where(col(OutboxRow.sent_at).is_(None), col(OutboxRow.created_at) <= cutoff)
                .order_by(col(OutboxRow.created_at))
                .limit(self.batch)
            )
            if is_postgres(str(self.engine.url)):
                query = query.with_for_update(skip_locked=True)
            for row in uow.session.exec(query).all():
                env = envelope_of(row)
                try:
                    with propagation.send_span(
                        env.queue, env.message_id, self.broker.system, env.headers, {}
                    ):
                        self.broker.send(env)
                except BrokerUnavailable as exc:
                    row.send_attempts += 1
                    row.last_error = str(exc)[:500]
                    uow.session.add(row)
                    self.failures += 1
                    log.warning("broker unavailable (%d): %s", self.failures, exc)
                    break
                now = utcnow()
                row.sent_at = now
                row.send_attempts += 1
                uow.session.add(row)
                metrics.record_outbox_lag((now - row.created_at).total_seconds(), row.queue)
                sent += 1
                self.failures = 0
        return sent

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
