"""Consumer dedupe: a message id is applied at most once (invariant 8).

`claim` runs inside the consumer's own transaction, so the inbox row and the
consumer's state change commit together or not at all. Both functions run
prebuilt Core statements on the session's connection (the consumer's hot path).
"""

from __future__ import annotations

from sqlalchemy import Table, bindparam, insert, select
from sqlmodel import Session

from orchestrator.store.outbox_tables import InboxRow
from orchestrator.store.tables import utcnow

_INBOX: Table = InboxRow.__table__  # type: ignore[attr-defined]
_APPLIED = select(_INBOX.c.message_id).where(_INBOX.c.message_id == bindparam("message_id"))
_CLAIM = insert(_INBOX)


def already_applied(session: Session, message_id: str) -> bool:
    return session.connection().execute(_APPLIED, {"message_id": message_id}).first() is not None


def claim(session: Session, message_id: str, consumer: str) -> bool:
    """Record `message_id` as applied; False when it was applied before."""
    if already_applied(session, message_id):
        return False
    # Executed at once: a concurrent duplicate fails here on the primary key.
    session.connection().execute(
        _CLAIM, {"message_id": message_id, "consumer": consumer, "processed_at": utcnow()}
    )
    return True


__all__ = ["already_applied", "claim"]
