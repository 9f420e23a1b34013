"""Consumer dedupe: a message id is applied at most once (invariant 8).

`claim` and `settle` run inside the consumer's own transaction, so the inbox
row and the consumer's state change commit together or not at all. They run
prebuilt Core statements on the session's connection (the consumer's hot path).
"""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy import Insert, Select, Table, bindparam, exists, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session

from orchestrator.store.events import ChainedEvent, chain_held, chain_hold, insert_event
from orchestrator.store.outbox_tables import InboxRow
from orchestrator.store.tables import WorkRow, utcnow
from orchestrator.store.work import COMPLETE, complete

_INBOX: Table = InboxRow.__table__  # type: ignore[attr-defined]
_WORK: Table = WorkRow.__table__  # type: ignore[attr-defined]
_APPLIED = select(_INBOX.c.message_id).where(_INBOX.c.message_id == bindparam("message_id"))
# One statement checks and claims: the row is written unless the id is there already (a
# concurrent copy's uncommitted row is waited for, then counts as there if it commits).
_CLAIM: dict[str, Insert] = {
    "postgresql": postgresql.insert(_INBOX).on_conflict_do_nothing().returning(_INBOX.c.message_id),
    "sqlite": sqlite.insert(_INBOX).on_conflict_do_nothing().returning(_INBOX.c.message_id),
}
# PostgreSQL: the claim, the work's completion and the saga's event chain in one round trip
# (a writable CTE): the work is completed only when the inbox row was written, and the chain
# is held for the `message applied` event that follows (`orchestrator.store.events`).
_CLAIMED = (
    postgresql.insert(_INBOX)
    .values(message_id=bindparam("message_id"), consumer=bindparam("consumer"), processed_at=bindparam("now"))
    .on_conflict_do_nothing()
    .returning(_INBOX.c.message_id)
    .cte("claimed")
)
_COMPLETED = COMPLETE.where(exists(select(_CLAIMED.c.message_id))).returning(_WORK.c.id).cte("completed")
_SETTLE: Select[bool, bool, str | None] = select(
    exists(select(_CLAIMED.c.message_id)), exists(select(_COMPLETED.c.id)), chain_hold("chain_of")
)
# The same with the consumer's event (`message applied`), written only when the work was
# completed, linked by the server onto the head the chain's lock gave (`ChainedEvent`).
_APPLIED_EVENT = ChainedEvent("applied_event")
_, _APPLIED_EVENT_WRITTEN = _APPLIED_EVENT.ctes(exists(select(_COMPLETED.c.id)))
_SETTLE_WITH_EVENT: Select[bool, bool, str, str | None] = select(
    exists(select(_CLAIMED.c.message_id)),
    exists(select(_COMPLETED.c.id)),
    _APPLIED_EVENT.head_of(),
    _APPLIED_EVENT.hash_of(_APPLIED_EVENT_WRITTEN),
)

Settled = Literal["applied", "duplicate", "lease-lost"]


def already_applied(session: Session, message_id: str) -> bool:
    return session.connection().execute(_APPLIED, {"message_id": message_id}).first() is not None


def claim(session: Session, message_id: str, consumer: str) -> bool:
    """Record `message_id` as applied; False when it was applied before."""
    conn = session.connection()
    written = conn.execute(
        _CLAIM[conn.dialect.name], {"message_id": message_id, "consumer": consumer, "processed_at": utcnow()}
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
) -> Settled:
    """Claim `message_id` and complete the work it carries, held by that message; with
    `event` (`insert_event`'s fields), the saga's event that says so, written with them.

    `applied`: all written; `duplicate`: the message was applied before (nothing
    written); `lease-lost`: the work is no longer this message's (the caller rolls
    back, so the inbox row goes with it). One statement on PostgreSQL, which also
    holds `saga_id`'s event chain for the rest of the transaction.
    """
    conn = session.connection()
    if conn.dialect.name != "postgresql":
        if not claim(session, message_id, consumer):
            return "duplicate"
        if not complete(session, work_id, message_id):
            return "lease-lost"
        if event is not None:
            insert_event(session, saga_id=saga_id, **event)
        return "applied"
    params = {"message_id": message_id, "consumer": consumer, "work_id": work_id, "held_by": message_id}
    if event is None:
        claimed, completed, head = conn.execute(
            _SETTLE, {**params, "chain_of": saga_id, "now": utcnow()}
        ).one()
        chain_held(session, saga_id, head)
    else:
        linked = ChainedEvent.params(session, saga_id=saga_id, **event)
        claimed, completed, head, new_hash = conn.execute(
            _SETTLE_WITH_EVENT, {**params, **linked, "now": utcnow()}
        ).one()
        ChainedEvent.written(session, linked, head, new_hash)
    if not claimed:
        return "duplicate"
    return "applied" if completed else "lease-lost"


__all__ = ["Settled", "already_applied", "claim", "settle"]
