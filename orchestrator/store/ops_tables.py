"""Operations tables (SQLModel, same metadata): submit requests and dead letters.

- `submit_requests`: one row per `submit --request-id ID` (HTTP `Idempotency-Key`),
  written in the same transaction as the saga it made, so a retried submit
  finds the saga instead of making a second one.
- `dead_letters`: a message that could not be parsed, or whose handler failed
  in a way no retry can fix, with its body and the reason; `requeued_at` /
  `requeued_as` once an operator sent it again through the outbox.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Text
from sqlmodel import Field, SQLModel

from orchestrator.store.tables import new_id, utcnow


class SubmitRequestRow(SQLModel, table=True):
    __tablename__ = "submit_requests"

    request_id: str = Field(primary_key=True)
    saga_id: str = Field(foreign_key="sagas.id", index=True)
    args_digest: str = Field(
        description="sha256 of the submit's arguments: the same id with others is refused"
    )
    created_at: datetime = Field(default_factory=utcnow)


class DeadLetterRow(SQLModel, table=True):
    __tablename__ = "dead_letters"

    id: str = Field(default_factory=new_id, primary_key=True)
    message_id: str | None = Field(default=None, index=True)
    task: str | None = None
    queue: str | None = None
    saga_id: str | None = Field(default=None, index=True)
    body: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    headers: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    reason: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, index=True)
    requeued_at: datetime | None = None
    requeued_as: str | None = Field(default=None, description="the outbox message id it was sent again as")
    requeued_by: str | None = None


__all__ = ["DeadLetterRow", "SubmitRequestRow"]
