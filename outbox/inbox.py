"""Consumer dedupe: a message id is applied at most once (invariant 8).

`claim` and `settle` run inside the consumer's own transaction, so the inbox
row and the consumer's state change commit together or not at all. They run
prebuilt Core statements on the session's connection (the consumer's hot path).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Insert, Select, Table, bindparam, exists, select
from sqlmodel import Session

from orchestrator.store.adapter import StorageAdapter, adapter_for
from orchestrator.store.events import ChainedEvent, chain_held, chain_hold, insert_event
from orchestrator.store.outbox_tables import InboxRow
from orchestrator.store.tables import WorkRow, utcnow
from orchestrator.store.work import COMPLETE, complete

_INBOX: Table = InboxRow.__table__  # type: ignore[attr-defined]
_WORK: Table = WorkRow.__table__  # type: ignore[attr-defined]
_APPLIED = select(_INBOX.c.message_id).where(_INBOX.c.message_id == bindparam("message_id"))


# One statement checks and claims: the row is written unless the id is there already (a
# concurrent copy's uncommitted row is waited for, then counts as there if it commits).
def _claim(adapter: StorageAdapter) -> Insert:
    claim: Insert = adapter.insert_ignoring(_INBOX).returning(_INBOX.c.message_id)
    return claim


@dataclass(frozen=True)
class _Settle:
    """One statement (a database with `one_statement_writes`): the claim, the work's completion
    and the saga's event chain in one round trip (a writable CTE): the work is completed only
    when the inbox row was written, and the chain is held for the `message applied` event that
    follows (`orchestrator.store.events`). `with_event` writes that event too, only when the
    work was completed, linked by the server onto the head the chain's lock gave (`ChainedEvent`)."""

    alone: Select[bool, bool, str | None]
    with_event: Select[bool, bool, str, str | None]


def _settle(adapter: StorageAdapter) -> _Settle:
    claimed = (
        adapter.insert_ignoring(_INBOX)
        .values(
            message_id=bindparam("message_id"), consumer=bindparam("consumer"), processed_at=bindparam("now")
        )
        .returning(_INBOX.c.message_id)
        .cte("claimed")
    )
    completed = COMPLETE.where(exists(select(claimed.c.message_id))).returning(_WORK.c.id).cte("completed")
    applied_event = ChainedEvent("applied_event")
    _, written = applied_event.ctes(exists(select(completed.c.id)))
    return _Settle(
        select(exists(select(claimed.c.message_id)), exists(select(completed.c.id)), chain_hold("chain_of")),
        select(
            exists(select(claimed.c.message_id)),
            exists(select(completed.c.id)),
            applied_event.head_of(),
            applied_event.hash_of(written),
        ),
    )


Settled = Literal["applied", "duplicate", "lease-lost"]


def already_applied(session: Session, message_id: str) -> bool:
    return session.connection().execute(_APPLIED, {"message_id": message_id}).first() is not None


def claim(session: Session, message_id: str, consumer: str, *, now: datetime | None = None) -> bool:
    """Record `message_id` as applied; False when it was applied before."""
    conn = session.connection()
    written = conn.execute(
        adapter_for(conn).built(_claim),
        {"message_id": message_id, "consumer": consumer, "processed_at": now or utcnow()},
    ).first()
    return written is not None


def settle(
    session: Session,
    message_id: str,
    consumer: str,
    *,
    work_id: str,
    saga_id: str,
    event: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> Settled:
    """Claim `message_id` and complete the work it carries, held by that message; with
    `event` (`insert_event`'s fields), the saga's event that says so, written with them.

    `applied`: all written; `duplicate`: the message was applied before (nothing
    written); `lease-lost`: the work is no longer this message's (the caller rolls
    back, so the inbox row goes with it). One statement on PostgreSQL, which also
    holds `saga_id`'s event chain for the rest of the transaction.
    """
    now = now or utcnow()
    conn = session.connection()
    adapter = adapter_for(conn)
    if not adapter.one_statement_writes:
        if not claim(session, message_id, consumer, now=now):
            return "duplicate"
        if not complete(session, work_id, message_id, now=now):
            return "lease-lost"
        if event is not None:
            insert_event(session, saga_id=saga_id, **event)
        return "applied"
    params = {"message_id": message_id, "consumer": consumer, "work_id": work_id, "held_by": message_id}
    if event is None:
        claimed, completed, head = conn.execute(
            adapter.built(_settle).alone, {**params, "chain_of": saga_id, "now": now}
        ).one()
        chain_held(session, saga_id, head)
    else:
        linked = ChainedEvent.params(session, saga_id=saga_id, **event)
        claimed, completed, head, new_hash = conn.execute(
            adapter.built(_settle).with_event, {**params, **linked, "now": now}
        ).one()
        ChainedEvent.written(session, linked, head, new_hash)
    if not claimed:
        return "duplicate"
    return "applied" if completed else "lease-lost"


__all__ = ["Settled", "already_applied", "claim", "settle"]
