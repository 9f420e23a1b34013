"""The `model_calls` table (SQLModel, the metadata of `orchestrator.store.tables`).

Its one writer is `orchestrator.store.model_calls`; the table lives apart so
that `orchestrator.store.schema` registers it without importing the units of work.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Float, Index, Text
from sqlmodel import Field, SQLModel

from orchestrator.store.tables import utcnow


class ModelCallRow(SQLModel, table=True):
    """One model call of a saga: what was asked, and what came back."""

    __tablename__ = "model_calls"
    __table_args__ = (Index("ix_model_calls_saga_seq", "saga_id", "seq", unique=True),)

    key: str = Field(primary_key=True, description="sha256 of (saga, role, round, request digest)")
    saga_id: str
    role: str = Field(description="the pipeline's role name")
    round: int = Field(description="the preparation round of the turn")
    seq: int = Field(description="the order of the call within the saga")
    request_id: str | None = Field(default=None, description="the delivery's message id that ran the turn")
    call_id: str | None = Field(default=None, description="the tool-call id the reply proposed, if one")
    profile: str = Field(description="the pipeline's model profile")
    model: str = Field(description="the model asked for")
    params: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    request_digest: str
    state: str = Field(description="intent | answered | failed")
    reply: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = Field(default=None, sa_type=Float)
    latency_ms: int | None = None
    attempts: int = Field(default=0, description="requests sent for this call, over every run")
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: datetime = Field(default_factory=utcnow)
    answered_at: datetime | None = None


__all__ = ["ModelCallRow"]
