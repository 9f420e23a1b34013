"""Consumer dedupe: a message id is applied at most once (invariant 8).

`claim` runs inside the consumer's own transaction, so the inbox row and the
consumer's state change commit together or not at all. Both functions run
prebuilt Core statements on the session's connection (the consumer's hot path).
"""

from __future__ import annotations

from sqlalchemy import Insert, Table, bindparam, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session

from orchestrator.store.outbox_tables import InboxRow
from orchestrator.store.tables import utcnow

_INBOX: Table = InboxRow.__table__  # type: ignore[attr-defined]
_APPLIED = select(_INBOX.c.message_id).where(_INBOX.c.message_id == bindparam("message_id"))
# One statement checks and claims: the row is written unless the id is there already (a
# concurrent copy's uncommitted row is waited for, then counts as there if it commits).
_CLAIM: dict[str, Insert] = {
    "postgresql": postgresql.insert(_INBOX).on_conflict_do_nothing().returning(_INBOX.c.message_id),
    "sqlite": sqlite.insert(_INBOX).on_conflict_do_nothing().returning(_INBOX.c.message_id),
}


def already_applied(session: Session, message_id: str) -> bool:
    return session.connection().execute(_APPLIED, {"message_id": message_id}).first() is not None


def claim(session: Session, message_id: str, consumer: str) -> bool:
    """Record `message_id` as applied; False when it was applied before."""
    conn = session.connection()
    written = conn.execute(
        _CLAIM[conn.dialect.name], {"message_id": message_id, "consumer": consumer, "processed_at": utcnow()}
    ).first()
    return written is not None


__all__ = ["already_applied", "claim"]
