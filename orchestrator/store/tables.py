"""Database tables (SQLModel): sagas, versions, artifacts, events, approvals,
the idempotency ledger, checkpoints, destination steps and work leases.

The outbox and inbox tables live in `orchestrator.store.outbox_tables` and share this metadata.
Versions and artifacts are immutable and content-addressed (sha256); events
are append-only and hash-chained per saga (`orchestrator.store.events`).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, Text, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from orchestrator.core.clock import DATABASE_TIME
from orchestrator.harness.event_chain import EVENT_SCHEMA, LEGACY_SCHEMA


def utcnow() -> datetime:
    """The database's time as this process reads it (`orchestrator.core.clock.DATABASE_TIME`),
    aware UTC; SQLModel stores it as UTC and gives it back aware."""
    return DATABASE_TIME.now()


def new_id() -> str:
    return uuid.uuid4().hex


def partial(name: str, *columns: str, where: str) -> Index:
    """An index over the rows `where` holds, on PostgreSQL and SQLite alike (migration 0015)."""
    return Index(name, *columns, postgresql_where=text(where), sqlite_where=text(where))


# The partial indexes' predicates, also written as literals in the queries they serve (a
# bound parameter would keep a cached generic plan from proving the index applies).
FINISHED_STATES_SQL = "state IN ('succeeded', 'failed', 'cancelled')"
WAITING_SQL = "state = 'ready-for-review'"


class SagaRow(SQLModel, table=True):
    __tablename__ = "sagas"
    __table_args__ = (
        # Pages newest first by keyset cursor; the waiting list; prune's window (migration 0015).
        Index("ix_sagas_created", "created_at", "id"),
        partial("ix_sagas_ready", "ready_at", "id", where=WAITING_SQL),
        partial("ix_sagas_finished", "updated_at", "id", where=FINISHED_STATES_SQL),
    )

    id: str = Field(default_factory=new_id, primary_key=True)
    brief: str = Field(sa_column=Column(Text, nullable=False))
    corpus: str
    destinations: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    state: str = Field(index=True)
    head_version: int = 0
    run: int = Field(default=1, description="the saga's session: bumped with every new head version")
    review_rounds: int = 0
    created_by: str
    created_by_id: str | None = Field(default=None, description="the submitter's principal id")
    reason: str | None = None
    cancel_requested_by: str | None = Field(
        default=None, description="an operator asked to cancel while executing: the runner stops and undoes"
    )
    trace_context: dict[str, str] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    ready_at: datetime | None = None
    pipeline: str = Field(default="default", description="the pipeline's name at submit")
    pipeline_digest: str | None = Field(
        default=None, description="the `pipeline` artifact the saga runs (null: the shipped default)"
    )
    prep_round: int = Field(default=0, description="the preparation round in progress (role_runs)")
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class RoleRunRow(SQLModel, table=True):
    """One pipeline role's run in one preparation round of a saga."""

    __tablename__ = "role_runs"

    saga_id: str = Field(foreign_key="sagas.id", primary_key=True)
    round: int = Field(primary_key=True)
    role: str = Field(primary_key=True)
    state: str = Field(description="waiting | queued | done | unchanged | failed")
    verdict: str | None = Field(default=None, description="a reviewer's pass | fail")
    result_digest: str | None = Field(default=None, description="the artifact the run made")
    reason: str | None = None
    updated_at: datetime = Field(default_factory=utcnow)


class VersionRow(SQLModel, table=True):
    __tablename__ = "versions"
    __table_args__ = (UniqueConstraint("saga_id", "number"),)

    id: str = Field(default_factory=new_id, primary_key=True)
    saga_id: str = Field(foreign_key="sagas.id", index=True)
    number: int
    digest: str = Field(index=True, description="sha256 of the markdown bytes")
    title: str
    author: str
    author_id: str | None = Field(default=None, description="a person's principal id; null: an agent")
    markdown: str = Field(sa_column=Column(Text, nullable=False))
    citations: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    evidence_digest: str | None = None
    review: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    created_at: datetime = Field(default_factory=utcnow)


class ArtifactRow(SQLModel, table=True):
    __tablename__ = "artifacts"

    digest: str = Field(primary_key=True, description="sha256 of the canonical JSON body")
    saga_id: str = Field(foreign_key="sagas.id", index=True)
    kind: str
    body: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class EventRow(SQLModel, table=True):
    __tablename__ = "events"
    __table_args__ = (
        Index("ix_events_saga_seq", "saga_id", "seq"),
        # One successor per event: a forked chain cannot be stored.
        UniqueConstraint("saga_id", "prev_hash"),
    )

    seq: int | None = Field(default=None, primary_key=True)
    event_id: str = Field(default_factory=new_id, unique=True)
    parent_event_id: str | None = None
    saga_id: str | None = Field(default=None, index=True)
    actor: str
    kind: str
    status: str
    tool: str | None = None
    artifact_digest: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
    proposed_at: datetime | None = None
    authorized_at: datetime | None = None
    sent_at: datetime | None = None
    acked_at: datetime | None = None
    prev_hash: str = Field(description="the saga's previous event's hash (GENESIS for its first)")
    hash: str = Field(description="sha256 over prev_hash and the event's canonical fields")
    principal_id: str | None = Field(default=None, description="the person behind it; null: the system")
    auth_method: str | None = Field(default=None, description="token | session | proxy | open")
    # A writer that does not know the column (a process of an earlier release, during an
    # upgrade) leaves it to the server default: version 1, the form it hashes.
    schema_version: int = Field(
        default=EVENT_SCHEMA,
        sa_column_kwargs={"server_default": str(LEGACY_SCHEMA)},
        description="the event schema it was written with (event_chain.KNOWN_SCHEMAS)",
    )


class ApprovalRow(SQLModel, table=True):
    __tablename__ = "approvals"

    id: str = Field(default_factory=new_id, primary_key=True)
    saga_id: str = Field(foreign_key="sagas.id", index=True)
    version: int
    version_digest: str
    destinations: list[str] = Field(sa_column=Column(JSON, nullable=False))
    session: str
    approver: str
    approver_id: str | None = Field(default=None, description="the approver's principal id")
    issued_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime
    token: str = Field(description="HMAC over the canonical binding")
    consumed_at: datetime | None = None
    consumed_by: str | None = None
    voided_at: datetime | None = None


class LedgerRow(SQLModel, table=True):
    """One external action per business key (invariant 3)."""

    __tablename__ = "ledger"

    key: str = Field(primary_key=True)
    tool: str
    saga_id: str | None = Field(default=None, index=True)
    args_digest: str
    status: str = Field(description="pending | done | uncertain | failed")
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    event_id: str | None = None
    attempts: int = 1
    claimed_until: datetime | None = Field(default=None, description="while pending: the claim's end")
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class CheckpointRow(SQLModel, table=True):
    """`AgentState` before a side effect, hash-chained to the previous one."""

    __tablename__ = "checkpoints"

    seq: int | None = Field(default=None, primary_key=True)
    saga_id: str | None = Field(default=None, index=True)
    event_id: str
    step: int
    state: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    prev_hash: str
    hash: str = Field(unique=True)
    created_at: datetime = Field(default_factory=utcnow)


class StepRow(SQLModel, table=True):
    """One publishing step per destination of a saga's execution."""

    __tablename__ = "steps"
    __table_args__ = (UniqueConstraint("saga_id", "uri"),)

    id: str = Field(default_factory=new_id, primary_key=True)
    saga_id: str = Field(foreign_key="sagas.id", index=True)
    position: int
    uri: str
    state: str = Field(default="pending", description="pending|executing|done|uncertain|failed|compensated")
    idempotency_key: str | None = None
    receipt: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    version_digest: str | None = None
    updated_at: datetime = Field(default_factory=utcnow)


class WorkRow(SQLModel, table=True):
    """A piece of work in flight, with its lease (the database holds the truth)."""

    __tablename__ = "work"
    # The relay's lease sweep reads only open work (migration 0015).
    __table_args__ = (partial("ix_work_open", "lease_until", where="done_at IS NULL"),)

    id: str = Field(default_factory=new_id, primary_key=True)
    saga_id: str = Field(index=True)
    task: str
    queue: str
    payload: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    attempts: int = 0
    lease_until: datetime = Field(index=True)
    holder: str | None = None
    done_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)


__all__ = [
    "ApprovalRow",
    "ArtifactRow",
    "CheckpointRow",
    "EventRow",
    "LedgerRow",
    "RoleRunRow",
    "SagaRow",
    "StepRow",
    "VersionRow",
    "WorkRow",
    "FINISHED_STATES_SQL",
    "WAITING_SQL",
    "new_id",
    "partial",
    "utcnow",
]
