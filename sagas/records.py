"""Saga rows and their changes: every transition writes its event.

Callers pass the session of their unit of work, so a transition, its event
and its outgoing messages commit together.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import bindparam
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from orchestrator.core.errors import InvalidInput, NotFound
from orchestrator.harness.digests import version_digest
from orchestrator.store.db import one_read
from orchestrator.store.harness_store import add_event
from orchestrator.store.tables import ApprovalRow, SagaRow, StepRow, VersionRow, utcnow
from sagas.machine import SagaEvent, SagaState, apply

MAX_SAGA_ID = 64
MAX_VERSION = 2**31 - 1
_HEX = re.compile(r"[0-9a-f]+")


def load_saga(session: Session, saga_id: str, *, lock: bool = False) -> SagaRow:
    saga = session.get(SagaRow, saga_id, with_for_update=lock)
    if saga is None:
        raise NotFound(f"no saga {saga_id!r}", saga_id=saga_id)
    return saga


_STATE = select(SagaRow.state).where(SagaRow.id == bindparam("saga_id"))


def state_of(engine: Engine, saga_id: str) -> SagaState:
    """The saga's state as last committed: one statement outside any transaction."""
    with one_read(engine) as conn:
        state = conn.execute(_STATE, {"saga_id": saga_id}).scalar()
    if state is None:
        raise NotFound(f"no saga {saga_id!r}", saga_id=saga_id)
    return SagaState(state)


def find_saga(session: Session, prefix: str, *, lock: bool = False) -> SagaRow:
    """A saga by id or unique id prefix (at least 6 characters); with `lock`, its row locked.

    An id is at most 64 characters (longer is `InvalidInput`); a prefix is
    matched only when it is lowercase hex, as every id Pressroom makes, and
    with LIKE's wildcards escaped all the same. A whole id is found and
    locked in one statement; a prefix is matched first, then its saga locked.
    """
    if len(prefix) > MAX_SAGA_ID:
        raise InvalidInput(f"a saga id is at most {MAX_SAGA_ID} characters, got {len(prefix)}")
    saga = session.get(SagaRow, prefix, with_for_update=lock)
    if saga is not None:
        return saga
    if len(prefix) >= 6 and _HEX.fullmatch(prefix):
        rows = session.exec(
            select(SagaRow).where(col(SagaRow.id).startswith(prefix, autoescape=True)).limit(2)
        ).all()
        if len(rows) == 1:
            return load_saga(session, rows[0].id, lock=True) if lock else rows[0]
    raise NotFound(f"no saga {prefix!r}", saga_id=prefix)


def transition(
    session: Session,
    saga: SagaRow,
    event: SagaEvent,
    *,
    actor: str,
    reason: str | None = None,
    detail: dict[str, Any] | None = None,
) -> SagaState:
    """Apply `event` (or raise `IllegalTransition`) and record it."""
    before = saga.state
    after = apply(before, event)
    saga.state = after.value
    saga.updated_at = utcnow()
    if reason is not None:
        saga.reason = reason
    if after is SagaState.READY_FOR_REVIEW:
        saga.ready_at = saga.updated_at
    session.add(saga)
    add_event(
        session,
        saga_id=saga.id,
        actor=actor,
        kind="transition",
        status=after.value,
        detail={"from": before, "to": after.value, "event": event.value, "reason": reason, **(detail or {})},
    )
    return after


def head(session: Session, saga: SagaRow) -> VersionRow | None:
    if saga.head_version == 0:
        return None
    return version(session, saga.id, saga.head_version)


_HEAD_DIGEST = (
    select(VersionRow.digest)
    .where(VersionRow.saga_id == bindparam("saga_id"), VersionRow.number == bindparam("number"))
    .limit(1)
)


def head_digest(session: Session, saga: SagaRow) -> str | None:
    """The head version's digest alone (one narrow read: no markdown), None before the first
    version. Read on the session's connection without a flush: for a saga whose versions this
    unit of work has not changed (the runner's)."""
    if saga.head_version == 0:
        return None
    digest = (
        session.connection().execute(_HEAD_DIGEST, {"saga_id": saga.id, "number": saga.head_version}).scalar()
    )
    if digest is None:
        raise NotFound(f"saga {saga.id} has no version {saga.head_version}", saga_id=saga.id)
    return str(digest)


def version(session: Session, saga_id: str, number: int) -> VersionRow:
    # A number no column can hold is not asked for (SQLite and PostgreSQL would raise).
    row = (
        session.exec(
            select(VersionRow).where(VersionRow.saga_id == saga_id, VersionRow.number == number)
        ).first()
        if 1 <= number <= MAX_VERSION
        else None
    )
    if row is None:
        raise NotFound(f"saga {saga_id} has no version {number}", saga_id=saga_id, version=number)
    return row


def versions(session: Session, saga_id: str) -> list[VersionRow]:
    return list(
        session.exec(
            select(VersionRow).where(VersionRow.saga_id == saga_id).order_by(col(VersionRow.number))
        ).all()
    )


def add_version(
    session: Session,
    saga: SagaRow,
    *,
    title: str,
    markdown: str,
    author: str,
    citations: list[dict[str, Any]],
    evidence_digest: str | None,
) -> VersionRow:
    """A new immutable head version; earlier approvals are voided, the run moves on."""
    row = VersionRow(
        saga_id=saga.id,
        number=saga.head_version + 1,
        digest=version_digest(title, markdown),
        title=title,
        author=author,
        markdown=markdown,
        citations=citations,
        evidence_digest=evidence_digest,
    )
    session.add(row)
    if saga.head_version:
        void_approvals(session, saga.id, reason="a new version was made")
        saga.run += 1
    saga.head_version = row.number
    saga.updated_at = utcnow()
    session.add(saga)
    add_event(
        session,
        saga_id=saga.id,
        actor=author,
        kind="version",
        status="created",
        artifact_digest=row.digest,
        detail={"version": row.number, "digest": row.digest, "citations": len(citations)},
    )
    return row


def void_approvals(session: Session, saga_id: str, *, reason: str) -> int:
    rows = session.exec(
        select(ApprovalRow).where(ApprovalRow.saga_id == saga_id, col(ApprovalRow.voided_at).is_(None))
    ).all()
    now = utcnow()
    voided = 0
    for row in rows:
        if row.consumed_at is None:
            row.voided_at = now
            session.add(row)
            voided += 1
    return voided


def steps(session: Session, saga_id: str) -> list[StepRow]:
    return list(
        session.exec(select(StepRow).where(StepRow.saga_id == saga_id).order_by(col(StepRow.position))).all()
    )


__all__ = [
    "add_version",
    "find_saga",
    "head",
    "head_digest",
    "load_saga",
    "state_of",
    "steps",
    "transition",
    "version",
    "versions",
    "void_approvals",
]
