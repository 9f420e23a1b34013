"""Outbox and inbox tables.

A row in `outbox` is written in the same transaction as the state change that
caused it (invariant 8); `sent_at` is set once the broker took it. A row in
`inbox` records that a consumer applied a message, in the same transaction as
the consumer's own change, so a redelivery is applied at most once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Index
from sqlmodel import Field, SQLModel

from orchestrator.store.tables import new_id, partial, utcnow


class OutboxRow(SQLModel, table=True):
    __tablename__ = "outbox"
    __table_args__ = (
        Index("ix_outbox_unsent", "sent_at", "created_at"),
        # The relay's idle scan reads only unsent rows (migration 0015).
        partial("ix_outbox_pending", "created_at", where="sent_at IS NULL"),
    )

    id: str = Field(default_factory=new_id, primary_key=True, description="the message id")
    saga_id: str | None = Field(default=None, index=True)
    task: str
    queue: str
    payload: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    headers: dict[str, str] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
    sent_at: datetime | None = None
    send_attempts: int = 0
    last_error: str | None = None


class InboxRow(SQLModel, table=True):
    __tablename__ = "inbox"

    message_id: str = Field(primary_key=True)
    consumer: str
    processed_at: datetime = Field(default_factory=utcnow)


__all__ = ["InboxRow", "OutboxRow"]
