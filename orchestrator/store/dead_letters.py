"""Dead letters: messages set aside with their body and the reason, to look at
and, once the cause is fixed, send again.

A message becomes a dead letter when it cannot be parsed (not a handoff, a
task no worker knows, content the worker refuses) or when its handler fails
in a way no retry can fix (`InvalidInput`, `NotFound`, `Refused`). Recording
one writes the row, an event on the saga it names (when that saga exists),
completes the message's work (so the lease sweeper does not send a known
poison again) and counts it in `pressroom.dead_letters`, in one transaction.

`requeue` sends one again through the outbox, reopening its work, and marks
the row requeued; a row is requeued at most once: the mark is a conditional
`UPDATE … WHERE requeued_at IS NULL` in the same transaction as the outbox
row, so of concurrent requeues (by full id or by prefix) exactly one sends it
and the others are refused. A prefix is matched only when it is lowercase hex
(six characters or more), with LIKE's wildcards escaped.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from orchestrator.core.clock import iso
from orchestrator.core.errors import NotFound, Refused
from orchestrator.store.db import UnitOfWork, unit_of_work
from orchestrator.store.harness_store import add_event
from orchestrator.store.ops_tables import DeadLetterRow
from orchestrator.store.tables import SagaRow, WorkRow, utcnow
from telemetry import metrics

DEAD_LETTER_HOLDER = "dead-letter"


def saga_hint(body: Any) -> str | None:
    """The saga a body names, if it names one as a string."""
    if isinstance(body, Mapping):
        value = body.get("saga_id")
        if isinstance(value, str) and 0 < len(value) <= 64:
            return value
    return None


def record(
    engine: Engine,
    *,
    reason: str,
    body: Any,
    message_id: str | None = None,
    task: str | None = None,
    queue: str | None = None,
    headers: Mapping[str, Any] | None = None,
    saga_id: str | None = None,
    work_id: str | None = None,
) -> str:
    """Set a message aside; the dead letter's id."""
    reason = " ".join(reason.split())[:2000]
    with unit_of_work(engine) as uow:
        s = uow.session
        known_saga = saga_id if saga_id and s.get(SagaRow, saga_id) is not None else None
        row = DeadLetterRow(
            message_id=message_id,
            task=task,
            queue=queue,
            saga_id=known_saga,
            body=_jsonable(body),
            headers={k: v for k, v in (headers or {}).items() if isinstance(v, str | int | float | bool)},
            reason=reason,
        )
        s.add(row)
        if work_id:
            s.execute(
                update(WorkRow)
                .where(col(WorkRow.id) == work_id, col(WorkRow.done_at).is_(None))
                .values(done_at=utcnow(), holder=DEAD_LETTER_HOLDER)
            )
        if known_saga:
            add_event(
                s,
                saga_id=known_saga,
                actor=task or "worker",
                kind="message",
                status="dead-letter",
                detail={"message_id": message_id, "dead_letter_id": row.id, "reason": reason[:500]},
            )
        dead_id = row.id
    metrics.record_dead_letter(queue)
    return dead_id


def _jsonable(body: Any) -> Any:
    if body is None or isinstance(body, str | int | float | bool | list | dict):
        return body
    if isinstance(body, bytes):
        return body.decode("utf-8", errors="replace")
    return repr(body)


def view(row: DeadLetterRow) -> dict[str, Any]:

    return {
        "id": row.id,
        "message_id": row.message_id,
        "task": row.task,
        "queue": row.queue,
        "saga_id": row.saga_id,
        "reason": row.reason,
        "body": row.body,
        "headers": row.headers,
        "created_at": iso(row.created_at),
        "requeued_at": iso(row.requeued_at),
        "requeued_as": row.requeued_as,
        "requeued_by": row.requeued_by,
    }


def listing(engine: Engine, *, limit: int = 200) -> list[dict[str, Any]]:
    with Session(engine) as s:
        rows = s.exec(select(DeadLetterRow).order_by(col(DeadLetterRow.created_at).desc()).limit(limit)).all()
        return [view(row) for row in rows]


def find(s: Session, dead_id: str) -> DeadLetterRow:
    row = s.get(DeadLetterRow, dead_id, with_for_update=True) if len(dead_id) <= 64 else None
    if row is None and 6 <= len(dead_id) <= 64 and all(c in "0123456789abcdef" for c in dead_id):
        rows = s.exec(
            select(DeadLetterRow).where(col(DeadLetterRow.id).startswith(dead_id, autoescape=True)).limit(2)
        ).all()
        row = rows[0] if len(rows) == 1 else None
    if row is None:
        raise NotFound(f"no dead letter {dead_id!r}")
    return row


def requeue(
    uow: UnitOfWork, dead_id: str, *, actor: str, lease: float, known_tasks: Mapping[str, str]
) -> tuple[DeadLetterRow, dict[str, Any]]:
    """Check a dead letter may be sent again and reopen its work, in the caller's
    transaction; the row and the payload to send (the caller adds the outbox row)."""
    s = uow.session
    row = find(s, dead_id)
    if row.requeued_at is not None:
        raise Refused(f"dead letter {row.id} was requeued already, as message {row.requeued_as}")
    if row.task not in known_tasks:
        raise Refused(f"dead letter {row.id} names no task a worker runs ({row.task!r}); it cannot be sent")
    if not isinstance(row.body, dict):
        raise Refused(f"dead letter {row.id} has a body that is not a JSON object; it cannot be sent")
    payload: dict[str, Any] = dict(row.body)
    now = utcnow()
    claimed = s.execute(
        update(DeadLetterRow)
        .where(col(DeadLetterRow.id) == row.id, col(DeadLetterRow.requeued_at).is_(None))
        .values(requeued_at=now, requeued_by=actor)
        .execution_options(synchronize_session=False)
    )
    if getattr(claimed, "rowcount", 0) != 1:  # another requeue got there first
        raise Refused(f"dead letter {row.id} was requeued already")
    work_id = payload.get("work_id")
    if isinstance(work_id, str):
        s.execute(
            update(WorkRow)
            .where(col(WorkRow.id) == work_id, col(WorkRow.holder) == DEAD_LETTER_HOLDER)
            .values(done_at=None, holder=None, lease_until=now + timedelta(seconds=lease))
        )
    row.requeued_at = now  # as the UPDATE wrote them, so the row's later flush agrees
    row.requeued_by = actor
    s.add(row)
    return row, payload


__all__ = ["DEAD_LETTER_HOLDER", "find", "listing", "record", "requeue", "saga_hint", "view"]
