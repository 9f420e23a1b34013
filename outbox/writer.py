"""Writing to the outbox, and sending right after the commit.

`Outbox.add` writes the row in the caller's unit of work, so the message
exists exactly when the state change does. Once that transaction commits,
the row is offered to the broker at once (no polling delay on the hot path);
whatever the broker did not take stays unsent for the relay.

The rows the broker took are marked sent in batches (`SentMarks`): a thread
of the producer's process writes every mark gathered within `interval` in one
relaxed `UPDATE`, off the path of the unit of work that sent them. A mark is
bookkeeping, never the truth about delivery: one lost to a crash (or not yet
written) leaves its row for the relay once it is `relay_grace` old, and the
copy it sends is deduplicated by the consumer's inbox.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Table, bindparam, update
from sqlalchemy.engine import Engine

from orchestrator.store.db import UnitOfWork, relaxed_commit, unit_of_work
from orchestrator.store.outbox_tables import OutboxRow
from orchestrator.store.tables import new_id, utcnow
from outbox.broker import Broker, BrokerUnavailable
from outbox.messages import Envelope
from telemetry import metrics, propagation

log = logging.getLogger(__name__)

_OUTBOX: Table = OutboxRow.__table__  # type: ignore[attr-defined]
# Prebuilt: one statement marks a whole batch, the producer's and the relay's (a row the
# other one marked meanwhile is left alone).
MARK_SENT = (
    update(_OUTBOX)
    .where(_OUTBOX.c.id.in_(bindparam("ids", expanding=True)), _OUTBOX.c.sent_at.is_(None))
    .values(sent_at=bindparam("now", type_=_OUTBOX.c.sent_at.type), send_attempts=_OUTBOX.c.send_attempts + 1)
    .returning(_OUTBOX.c.id, _OUTBOX.c.created_at, _OUTBOX.c.queue)
)
MARK_INTERVAL = 0.05
"""Seconds a sent-mark may wait for others to share its `UPDATE`: far below the relay's grace."""
MARK_BATCH = 500
IDLE_SECONDS = 5.0


class SentMarks:
    """The producer's sent-marks, written in batches by a thread of this process.

    `add` only queues the mark; the thread, started on first use (and again
    in a forked child, which does not inherit threads), waits `interval` for
    more (or for a full batch), then writes them, one relaxed `UPDATE` per
    `batch` marks, and stops after `IDLE_SECONDS` with nothing to do. `flush`
    writes what is queued from the calling thread; it runs for every instance
    at interpreter exit too. A batch the database refuses is dropped with a
    warning: its rows are the relay's to send again.
    """

    def __init__(self, engine: Engine, *, interval: float = MARK_INTERVAL, batch: int = MARK_BATCH) -> None:
        self.engine = engine
        self.interval = interval
        self.batch = batch
        self._start_afresh()
        _ALL.add(self)

    def _start_afresh(self) -> None:
        """No marks, no thread, new locks: at creation, and in a forked child (which inherits
        neither the parent's thread nor its marks, and may inherit a lock that thread held)."""
        self._pending: dict[str, datetime] = {}
        self._ready = threading.Condition()
        self._writing = threading.Lock()  # one batch at a time, in the order queued
        self._thread: threading.Thread | None = None
        self._closing = False

    def add(self, message_id: str, sent_at: datetime) -> None:
        with self._ready:
            self._pending[message_id] = sent_at
            self._closing = False
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pressroom-sent-marks", daemon=True)
                self._thread.start()
            if len(self._pending) in (1, self.batch):  # wakes an idle thread, or ends its wait
                self._ready.notify()

    def close(self) -> None:
        """Write what is queued and stop the thread (a later mark starts one again)."""
        with self._ready:
            self._closing = True
            self._ready.notify()
        self.flush()

    def pending(self) -> int:
        with self._ready:
            return len(self._pending)

    def flush(self) -> int:
        """Write every queued mark now, `batch` per statement; how many rows were marked."""
        with self._writing:
            with self._ready:
                marks, self._pending = self._pending, {}
            ids = list(marks)
            return sum(
                self._write({i: marks[i] for i in ids[at : at + self.batch]})
                for at in range(0, len(ids), self.batch)
            )

    def _run(self) -> None:
        while True:
            with self._ready:
                work = self._ready.wait_for(lambda: self._pending or self._closing, timeout=IDLE_SECONDS)
                if not work or self._closing:
                    self._thread = None  # idle or closed: the next mark starts a thread again
                    return
                # Let the marks of other sends join this one, unless a batch is full.
                self._ready.wait_for(lambda: len(self._pending) >= self.batch, timeout=self.interval)
            self.flush()

    def _write(self, marks: dict[str, datetime]) -> int:
        if not marks:
            return 0
        now = utcnow()
        try:
            with unit_of_work(self.engine) as uow:
                relaxed_commit(uow.session)
                marked = uow.session.connection().execute(MARK_SENT, {"ids": list(marks), "now": now}).all()
        except Exception as exc:  # the rows stay unsent: the relay sends them again
            log.warning("could not mark %d outbox rows sent, left for the relay: %s", len(marks), exc)
            return 0
        for message_id, created_at, queue in marked:
            metrics.record_outbox_lag((marks[message_id] - created_at).total_seconds(), queue)
        return len(marked)


_ALL: weakref.WeakSet[SentMarks] = weakref.WeakSet()


def _flush_all() -> None:
    for marks in list(_ALL):
        marks.flush()


def _after_fork_in_child() -> None:
    for marks in list(_ALL):
        marks._start_afresh()


atexit.register(_flush_all)
os.register_at_fork(after_in_child=_after_fork_in_child)


def envelope_of(row: OutboxRow) -> Envelope:
    return Envelope(
        message_id=row.id, task=row.task, queue=row.queue, payload=row.payload, headers=row.headers
    )


class Outbox:
    def __init__(self, engine: Engine, broker: Broker) -> None:
        self.engine = engine
        self.broker = broker
        self.marks = SentMarks(engine)

    def add(
        self,
        uow: UnitOfWork,
        *,
        saga_id: str | None,
        task: str,
        queue: str,
        payload: dict[str, Any],
        attributes: dict[str, Any] | None = None,
    ) -> str:
        message_id = new_id()
        headers = propagation.create_span(queue, message_id, self.broker.system, attributes or {})
        row = OutboxRow(
            id=message_id, saga_id=saga_id, task=task, queue=queue, payload=payload, headers=headers
        )
        uow.session.add(row)
        envelope = envelope_of(row)

        def send_after_commit() -> None:
            self.send_now([envelope], attributes)

        uow.after_commit(send_after_commit)
        return message_id

    def send_now(self, envelopes: Iterable[Envelope], attributes: dict[str, Any] | None = None) -> int:
        """Offer committed rows to the broker; queue a sent-mark for each one it took."""
        sent = 0
        for env in envelopes:
            try:
                with propagation.send_span(
                    env.queue, env.message_id, self.broker.system, env.headers, attributes or {}
                ):
                    self.broker.send(env)
            except BrokerUnavailable as exc:
                log.warning("left %s for the relay: %s", env.message_id, exc)
                continue
            self.marks.add(env.message_id, utcnow())
            sent += 1
        return sent


__all__ = ["MARK_INTERVAL", "MARK_SENT", "Outbox", "SentMarks", "envelope_of"]
