"""The harness store's rows and queries on SQL: approvals, the ledger, the call's pinned transaction.

Helpers of `orchestrator.store.harness_store` (the `HarnessStore` adapter): the
queries its authorization reads and its pre-execute record are made of.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Table, bindparam, insert, update
from sqlalchemy import select as core_select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from orchestrator.core.errors import (
    ApprovalRefused,
    ApproverLapsed,
    IdempotencyConflict,
    KeyInFlight,
)
from orchestrator.harness.approvals import ApprovalBinding, ApprovalView
from orchestrator.harness.checkpoints import GENESIS, AgentState, chain_hash
from orchestrator.harness.ledger_status import RESTARTABLE, LedgerStatus
from orchestrator.harness.ports import AuthorizationReads, LedgerView
from orchestrator.store.db import WRITE_OPTION, UnitOfWork, unit_of_work
from orchestrator.store.people import approver_lapse
from orchestrator.store.tables import (
    ApprovalRow,
    CheckpointRow,
    LedgerRow,
    SagaRow,
    utcnow,
)

# The write path's statements, built once and run on the call's connection
# (as the consumer's are): no ORM execution path, no identity map to keep.
_LEDGER: Table = LedgerRow.__table__  # type: ignore[attr-defined]
_APPROVALS: Table = ApprovalRow.__table__  # type: ignore[attr-defined]
_CHECKPOINTS: Table = CheckpointRow.__table__  # type: ignore[attr-defined]
_LEDGER_HELD = (
    core_select(_LEDGER.c.args_digest, _LEDGER.c.status, _LEDGER.c.claimed_until)
    .where(_LEDGER.c.key == bindparam("k"))
    .with_for_update()
)
_LEDGER_NEW = insert(_LEDGER)
_LEDGER_AGAIN = (
    update(_LEDGER)
    .where(_LEDGER.c.key == bindparam("k"))
    .values(
        status=LedgerStatus.PENDING.value,
        attempts=_LEDGER.c.attempts + 1,
        claimed_until=bindparam("b_until", type_=_LEDGER.c.claimed_until.type),
        updated_at=bindparam("b_now", type_=_LEDGER.c.updated_at.type),
    )
)
_LEDGER_FINISH = (
    update(_LEDGER)
    .where(_LEDGER.c.key == bindparam("k"))
    .values(
        status=bindparam("b_status"),
        result=bindparam("b_result", type_=_LEDGER.c.result.type),
        event_id=bindparam("b_event"),
        updated_at=bindparam("b_now", type_=_LEDGER.c.updated_at.type),
    )
)
_CONSUME = (
    update(_APPROVALS)
    .where(
        _APPROVALS.c.id == bindparam("a"),
        _APPROVALS.c.consumed_at.is_(None),
        _APPROVALS.c.voided_at.is_(None),
        _APPROVALS.c.expires_at > bindparam("b_now", type_=_APPROVALS.c.expires_at.type),
    )
    .values(consumed_at=bindparam("b_now"), consumed_by=bindparam("b_exec"))
    .returning(_APPROVALS.c.approver_id, _APPROVALS.c.approver)
)
_CHECKPOINT_NEW = insert(_CHECKPOINTS)
_CHECKPOINT_HEAD = (
    core_select(_CHECKPOINTS.c.hash)
    .where(_CHECKPOINTS.c.saga_id == bindparam("saga_id"))
    .order_by(_CHECKPOINTS.c.seq.desc())
    .limit(1)
)
_LOOSE_CHECKPOINT_HEAD = (
    core_select(_CHECKPOINTS.c.hash)
    .where(_CHECKPOINTS.c.saga_id.is_(None))
    .order_by(_CHECKPOINTS.c.seq.desc())
    .limit(1)
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
            expires_at=aware(row.expires_at),
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


def aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class CallTx:
    """One pooled connection for one call: the authorization reads and the intent
    commit as its first transaction, the result as its second (invariant 4 holds:
    the first commits before the executor runs)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.conn = engine.execution_options(**{WRITE_OPTION: True}).connect()
        self._open: UnitOfWork | None = None

    def unit(self) -> UnitOfWork:
        """The open transaction, or a new one on the same connection."""
        if self._open is None:
            uow = UnitOfWork(self.engine)
            uow.session.close()
            uow.session = Session(bind=self.conn, expire_on_commit=False)
            self._open = uow
        return self._open

    def commit(self) -> None:
        uow, self._open = self._open, None
        if uow is not None:
            uow.session.commit()
            uow.session.close()
            uow.run_after_commit()

    def rollback(self) -> None:
        uow, self._open = self._open, None
        if uow is not None:
            uow.session.rollback()
            uow.session.close()

    def release(self) -> None:
        """Roll back whatever was left open (a refusal that wrote nothing) and return the connection."""
        self.rollback()
        self.conn.close()


@contextmanager
def call_unit(engine: Engine, tx: Any) -> Iterator[UnitOfWork]:
    """The call's transaction on its pinned connection when given, the caller's unit
    of work when one is given (it commits with the caller), else one of its own."""
    if isinstance(tx, UnitOfWork):
        yield tx
        return
    if not isinstance(tx, CallTx):
        with unit_of_work(engine) as uow:
            yield uow
        return
    uow = tx.unit()
    try:
        yield uow
    except BaseException:
        tx.rollback()
        raise
    tx.commit()


def read_for_authorization(
    s: Session, key: str | None, saga_id: str | None, version_digest: str | None
) -> AuthorizationReads:
    return AuthorizationReads(
        ledger=ledger_row(s, key) if key else None,
        saga_session=saga_session_of(s, saga_id) if saga_id is not None else None,
        approval=approval_of(s, saga_id, version_digest)
        if saga_id is not None and version_digest is not None
        else None,
    )


def saga_session_of(s: Session, saga_id: str) -> str | None:
    saga = s.get(SagaRow, saga_id)
    return f"{saga.id}:{saga.run}" if saga else None


def approval_of(s: Session, saga_id: str, version_digest: str) -> ApprovalView | None:
    row = s.exec(
        select(ApprovalRow)
        .where(ApprovalRow.saga_id == saga_id, ApprovalRow.version_digest == version_digest)
        .order_by(col(ApprovalRow.issued_at).desc())
    ).first()
    return approval_view(row) if row else None


def ledger_row(s: Session, key: str) -> LedgerView | None:
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


def consume_approval(s: Session, approval_id: str, execution: str, now: datetime) -> tuple[str | None, str]:
    """Consume once, atomically; the same execution may go on using it. The
    approver (`approver_id`, `approver`) of the approval consumed."""
    conn = s.connection()
    taken = conn.execute(_CONSUME, {"a": approval_id, "b_now": now, "b_exec": execution}).first()
    if taken is not None:
        return taken[0], taken[1]
    row = s.get(ApprovalRow, approval_id)
    if row is None:
        raise ApprovalRefused("approval not found", approval_id=approval_id)
    if row.voided_at is not None:
        raise ApprovalRefused("approval was voided", approval_id=approval_id)
    if row.consumed_at is None and aware(row.expires_at) <= now:
        raise ApprovalRefused("approval expired", approval_id=approval_id)
    if row.consumed_by != execution:
        raise ApprovalRefused("approval was already used by another execution", approval_id=approval_id)
    return row.approver_id, row.approver


def approver_still_reviewer(s: Session, approval_id: str, approver_id: str | None, approver: str) -> None:
    """In the pre-execute transaction: the approver is still an active reviewer (closed mode)."""
    why = approver_lapse(s, approver_id, approver)
    if why:
        raise ApproverLapsed(why, approval_id=approval_id)


def ledger_pending(
    s: Session, key: str, state: AgentState, saga_id: str | None, now: datetime, until: datetime
) -> None:
    """The key's ledger row `pending`, claimed until `until`: a new row, or a restartable one again."""
    conn = s.connection()
    row = conn.execute(_LEDGER_HELD, {"k": key}).first()
    if row is None:
        # A concurrent first call inserts the same key: one of the two fails on the primary key.
        conn.execute(
            _LEDGER_NEW,
            {
                "key": key,
                "tool": state.tool,
                "saga_id": saga_id,
                "args_digest": state.args_digest,
                "status": LedgerStatus.PENDING.value,
                "attempts": 1,
                "claimed_until": until,
                "created_at": now,
                "updated_at": now,
            },
        )
        return
    args_digest, status, claimed_until = row
    if args_digest != state.args_digest:
        raise IdempotencyConflict(f"key {key} was used with other arguments", key=key)
    if status == LedgerStatus.PENDING and claimed_until is not None and aware(claimed_until) > now:
        raise KeyInFlight(f"key {key} is in flight", key=key)
    if status not in RESTARTABLE:
        raise IdempotencyConflict(f"key {key} is {status}", key=key)
    conn.execute(_LEDGER_AGAIN, {"k": key, "b_until": until, "b_now": now})


def finish_ledger(s: Session, key: str, status: str, result: dict[str, Any] | None, event_id: str) -> None:
    """The key's outcome on its ledger row (none there: nothing to finish)."""
    values = {"k": key, "b_status": status, "b_result": result, "b_event": event_id, "b_now": utcnow()}
    s.connection().execute(_LEDGER_FINISH, values)


def add_checkpoint(s: Session, saga_id: str | None, state: AgentState) -> None:
    """The state before a side effect, chained onto the saga's last checkpoint (the
    caller holds the saga's lock, so the chain cannot fork)."""
    conn = s.connection()
    if saga_id is not None:
        found = conn.execute(_CHECKPOINT_HEAD, {"saga_id": saga_id}).scalar()
    else:
        found = conn.execute(_LOOSE_CHECKPOINT_HEAD).scalar()
    prev_hash = found or GENESIS
    conn.execute(
        _CHECKPOINT_NEW,
        {
            "saga_id": saga_id,
            "event_id": state.event_id,
            "step": state.step,
            "state": state.model_dump(mode="json"),
            "prev_hash": prev_hash,
            "hash": chain_hash(prev_hash, state),
            "created_at": utcnow(),
        },
    )


__all__ = [
    "CallTx",
    "add_checkpoint",
    "approval_of",
    "approval_row",
    "approval_view",
    "approver_still_reviewer",
    "aware",
    "call_unit",
    "consume_approval",
    "finish_ledger",
    "ledger_pending",
    "ledger_row",
    "read_for_authorization",
    "saga_session_of",
]
