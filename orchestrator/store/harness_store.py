"""The harness's store on SQL: events, approvals, the ledger, checkpoints.

`begin_effect` is the pre-execute record (invariant 4): approval consumption,
the chained checkpoint, the ledger row `pending` and the intent event commit
in one transaction before the executor runs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Table, insert, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from orchestrator.errors import ApprovalRefused, ApproverLapsed, IdempotencyConflict
from orchestrator.harness.approvals import ApprovalBinding, ApprovalView
from orchestrator.harness.checkpoints import GENESIS, AgentState, chain_hash
from orchestrator.harness.ports import NO_READS, AuthorizationReads, EventTimes, LedgerView
from orchestrator.harness.principals import current_principal
from orchestrator.store.db import unit_of_work
from orchestrator.store.people import approver_lapse
from orchestrator.store.tables import (
    ApprovalRow,
    CheckpointRow,
    EventRow,
    LedgerRow,
    SagaRow,
    new_id,
    utcnow,
)


def approval_view(row: ApprovalRow) -> ApprovalView:
    return ApprovalView(
        approval_id=row.id,
        binding=ApprovalBinding(
            saga_id=row.saga_id,
            version=row.version,
            version_digest=row.version_digest,
            destinations=tuple(row.destinations),
            session=row.session,
            approver=row.approver,
            expires_at=_aware(row.expires_at),
        ),
        token=row.token,
        consumed_by=row.consumed_by,
        voided=row.voided_at is not None,
    )


def approval_row(binding: ApprovalBinding, token: str, *, issued_at: datetime) -> ApprovalRow:
    """The stored form of an issued approval (the inverse of `approval_view`)."""
    return ApprovalRow(
        saga_id=binding.saga_id,
        version=binding.version,
        version_digest=binding.version_digest,
        destinations=list(binding.destinations),
        session=binding.session,
        approver=binding.approver,
        issued_at=issued_at,
        expires_at=binding.expires_at,
        token=token,
    )


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def acting_fields() -> dict[str, str | None]:
    """`principal_id` and `auth_method` of the principal acting now (null: the system)."""
    principal = current_principal()
    if principal is None:
        return {"principal_id": None, "auth_method": None}
    return {"principal_id": principal.id, "auth_method": principal.auth}


def add_event(session: Session, **fields: Any) -> EventRow:
    times: EventTimes | None = fields.pop("times", None)
    stamp: dict[str, Any] = {k: v for k, v in acting_fields().items() if k not in fields}
    row = EventRow(**fields, **stamp, **(times.model_dump() if times else {}))
    if row.detail is None:
        row.detail = {}
    session.add(row)
    return row


_EVENTS: Table = EventRow.__table__  # type: ignore[attr-defined]
_INSERT_EVENT = insert(_EVENTS)


def insert_event(
    session: Session, *, saga_id: str | None, actor: str, kind: str, status: str, detail: dict[str, Any]
) -> str:
    """`add_event` for a hot path: one prebuilt Core INSERT on the session's
    connection; the event id. Whatever the session holds is flushed first, so
    this event still follows the transaction's earlier events in `seq`."""
    session.flush()
    event_id = new_id()
    session.connection().execute(
        _INSERT_EVENT,
        {
            "event_id": event_id,
            "saga_id": saga_id,
            "actor": actor,
            "kind": kind,
            "status": status,
            "detail": detail,
            "created_at": utcnow(),
            **acting_fields(),
        },
    )
    return event_id


class SqlHarnessStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def saga_session(self, saga_id: str) -> str | None:
        with Session(self.engine) as s:
            return _saga_session(s, saga_id)

    def find_approval(self, saga_id: str, version_digest: str) -> ApprovalView | None:
        with Session(self.engine) as s:
            return _find_approval(s, saga_id, version_digest)

    def ledger_get(self, key: str) -> LedgerView | None:
        with Session(self.engine) as s:
            return _ledger_get(s, key)

    def authorization_reads(
        self, key: str | None, saga_id: str | None, version_digest: str | None
    ) -> AuthorizationReads:
        if not key and saga_id is None:
            return NO_READS
        with Session(self.engine) as s:
            return AuthorizationReads(
                ledger=_ledger_get(s, key) if key else None,
                saga_session=_saga_session(s, saga_id) if saga_id is not None else None,
                approval=_find_approval(s, saga_id, version_digest)
                if saga_id is not None and version_digest is not None
                else None,
            )

    def record_event(
        self,
        *,
        saga_id: str | None,
        actor: str,
        kind: str,
        status: str,
        tool: str | None = None,
        detail: dict[str, Any] | None = None,
        times: EventTimes | None = None,
        parent_event_id: str | None = None,
        hook: Callable[[Any], None] | None = None,
    ) -> str:
        with unit_of_work(self.engine) as uow:
            row = add_event(
                uow.session,
                saga_id=saga_id,
                actor=actor,
                kind=kind,
                status=status,
                tool=tool,
                detail=detail or {},
                times=times,
                parent_event_id=parent_event_id,
            )
            if hook is not None:
                hook(uow)
            return row.event_id

    def begin_effect(
        self,
        *,
        saga_id: str | None,
        actor: str,
        state: AgentState,
        approval_id: str | None,
        execution: str | None,
        times: EventTimes,
        claim_seconds: float = 30.0,
    ) -> str:
        now = utcnow()
        key = state.idempotency_key
        try:
            with unit_of_work(self.engine) as uow:
                s = uow.session
                if saga_id is not None:
                    # Serialize effects of one saga: the checkpoint chain never forks.
                    s.get(SagaRow, saga_id, with_for_update=True)
                if approval_id is not None:
                    _consume(s, approval_id, execution or "", now)
                    _approver_still_reviewer(s, approval_id)
                if key:
                    _ledger_pending(s, key, state, saga_id, now, now + timedelta(seconds=claim_seconds))
                prev = s.exec(
                    select(CheckpointRow.hash)
                    .where(CheckpointRow.saga_id == saga_id)
                    .order_by(col(CheckpointRow.seq).desc())
                ).first()
                prev_hash = prev or GENESIS
                s.add(
                    CheckpointRow(
                        saga_id=saga_id,
                        event_id=state.event_id,
                        step=state.step,
                        state=state.model_dump(mode="json"),
                        prev_hash=prev_hash,
                        hash=chain_hash(prev_hash, state),
                    )
                )
                add_event(
                    s,
                    event_id=state.event_id,
                    saga_id=saga_id,
                    actor=actor,
                    kind="intent",
                    status="pending",
                    tool=state.tool,
                    detail={"key": key, "args_digest": state.args_digest, "approval_id": approval_id},
                    times=times,
                )
        except IntegrityError:
            raise IdempotencyConflict(f"another call holds key {key} in flight", key=key) from None
        return state.event_id

    def finish_effect(
        self,
        *,
        key: str,
        ledger_status: str,
        result: dict[str, Any] | None,
        event: dict[str, Any],
        hook: Callable[[Any], None] | None = None,
    ) -> str:
        with unit_of_work(self.engine) as uow:
            s = uow.session
            row = s.get(LedgerRow, key, with_for_update=True)
            if row is not None:
                row.status = ledger_status
                row.result = result
                row.updated_at = utcnow()
                s.add(row)
            ev = add_event(s, **event)
            if row is not None:
                row.event_id = ev.event_id
            if hook is not None and ledger_status == "done":
                hook(uow)
            return ev.event_id


def _saga_session(s: Session, saga_id: str) -> str | None:
    saga = s.get(SagaRow, saga_id)
    return f"{saga.id}:{saga.run}" if saga else None


def _find_approval(s: Session, saga_id: str, version_digest: str) -> ApprovalView | None:
    row = s.exec(
        select(ApprovalRow)
        .where(ApprovalRow.saga_id == saga_id, ApprovalRow.version_digest == version_digest)
        .order_by(col(ApprovalRow.issued_at).desc())
    ).first()
    return approval_view(row) if row else None


def _ledger_get(s: Session, key: str) -> LedgerView | None:
    row = s.get(LedgerRow, key)
    if row is None:
        return None
    return LedgerView(
        key=row.key,
        tool=row.tool,
        saga_id=row.saga_id,
        args_digest=row.args_digest,
        status=row.status,
        result=row.result,
        attempts=row.attempts,
        claimed_until=row.claimed_until,
    )


def _consume(s: Session, approval_id: str, execution: str, now: datetime) -> None:
    """Consume once, atomically; the same execution may go on using it."""
    taken = s.execute(
        update(ApprovalRow)
        .where(
            col(ApprovalRow.id) == approval_id,
            col(ApprovalRow.consumed_at).is_(None),
            col(ApprovalRow.voided_at).is_(None),
            col(ApprovalRow.expires_at) > now,
        )
        .values(consumed_at=now, consumed_by=execution)
    )
    if taken.rowcount == 1:  # type: ignore[attr-defined]
        return
    row = s.get(ApprovalRow, approval_id)
    if row is None:
        raise ApprovalRefused("approval not found", approval_id=approval_id)
    if row.voided_at is not None:
        raise ApprovalRefused("approval was voided", approval_id=approval_id)
    if row.consumed_at is None and _aware(row.expires_at) <= now:
        raise ApprovalRefused("approval expired", approval_id=approval_id)
    if row.consumed_by != execution:
        raise ApprovalRefused("approval was already used by another execution", approval_id=approval_id)


def _approver_still_reviewer(s: Session, approval_id: str) -> None:
    """In the pre-execute transaction: the approver is still an active reviewer (closed mode)."""
    row = s.get(ApprovalRow, approval_id)
    why = approver_lapse(s, row.approver_id, row.approver) if row is not None else None
    if why:
        raise ApproverLapsed(why, approval_id=approval_id)


def _ledger_pending(
    s: Session, key: str, state: AgentState, saga_id: str | None, now: datetime, until: datetime
) -> None:
    row = s.get(LedgerRow, key, with_for_update=True)
    if row is None:
        s.add(
            LedgerRow(
                key=key,
                tool=state.tool,
                saga_id=saga_id,
                args_digest=state.args_digest,
                status="pending",
                claimed_until=until,
            )
        )
        s.flush()
        return
    if row.args_digest != state.args_digest:
        raise IdempotencyConflict(f"key {key} was used with other arguments", key=key)
    if row.status == "pending" and row.claimed_until is not None and _aware(row.claimed_until) > now:
        raise IdempotencyConflict(f"key {key} is in flight", key=key, in_flight=True)
    if row.status not in ("failed", "absent", "pending"):
        raise IdempotencyConflict(f"key {key} is {row.status}", key=key)
    row.status = "pending"
    row.attempts += 1
    row.claimed_until = until
    row.updated_at = now
    s.add(row)


__all__ = ["SqlHarnessStore", "approval_row", "add_event", "approval_view", "insert_event", "new_id"]
