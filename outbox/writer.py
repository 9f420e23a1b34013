"""Writing to the outbox, and sending right after the commit.

`Outbox.add` writes the row in the caller's unit of work, so the message
exists exactly when the state change does. Once that transaction commits,
the row is offered to the broker at once (no polling delay on the hot path);
whatever the broker did not take stays unsent for the relay.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
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
# Prebuilt, run on the unit of work's connection (the producer's hot path, once per handoff).
_MARK_SENT = (
    update(_OUTBOX)
    .where(_OUTBOX.c.id == bindparam("message_id"), _OUTBOX.c.sent_at.is_(None))
    .values(sent_at=bindparam("now", type_=_OUTBOX.c.sent_at.type), send_attempts=_OUTBOX.c.send_attempts + 1)
    .returning(_OUTBOX.c.created_at, _OUTBOX.c.queue)
)


def envelope_of(row: OutboxRow) -> Envelope:
    return Envelope(
        message_id=row.id, task=row.task, queue=row.queue, payload=row.payload, headers=row.headers
    )


class Outbox:
    def __init__(self, engine: Engine, broker: Broker) -> None:
        self.engine = engine
        self.broker = broker

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
        """Offer committed rows to the broker; mark the ones it took as sent."""
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
            self.mark_sent(env.message_id)
            sent += 1
        return sent

    def mark_sent(self, message_id: str) -> None:
        now = utcnow()
        with unit_of_work(self.engine) as uow:
            relaxed_commit(uow.session)
            marked = (
                uow.session.connection().execute(_MARK_SENT, {"message_id": message_id, "now": now}).first()
            )
        if marked is not None:
            created_at, queue = marked
            metrics.record_outbox_lag((now - created_at).total_seconds(), queue)


__all__ = ["Outbox", "envelope_of"]
