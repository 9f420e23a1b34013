"""Consumer dedupe: a message id is applied at most once (invariant 8).

`claim` runs inside the consumer's own transaction, so the inbox row and the
consumer's state change commit together or not at all.
"""

from __future__ import annotations

from sqlmodel import Session

from outbox.tables import InboxRow


def already_applied(session: Session, message_id: str) -> bool:
    return session.get(InboxRow, message_id) is not None


def claim(session: Session, message_id: str, consumer: str) -> bool:
    """Record `message_id` as applied; False when it was applied before."""
    if already_applied(session, message_id):
        return False
    session.add(InboxRow(message_id=message_id, consumer=consumer))
    session.flush()  # a concurrent duplicate fails here on the primary key
    return True


__all__ = ["already_applied", "claim"]
