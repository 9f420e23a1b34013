"""The harness's store on SQL: events, approvals, the ledger, checkpoints.

`begin_effect` is the pre-execute record (invariant 4): approval consumption,
the chained checkpoint, the ledger row `pending` and the intent event commit
in one transaction before the executor runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from orchestrator.core.errors import (
    ApprovalRefused,
    ApproverLapsed,
    IdempotencyConflict,
    KeyInFlight,
    NotFound,
)
from orchestrator.harness.approvals import ApprovalBinding, ApprovalView
from orchestrator.harness.budget import Charge
from orchestrator.harness.checkpoints import GENESIS, AgentState, chain_hash
from orchestrator.harness.ledger_status import RESTARTABLE, LedgerStatus
from orchestrator.harness.ports import NO_READS, AuthorizationReads, EventTimes, LedgerView
from orchestrator.store.budget import charge as charge_budget
from orchestrator.store.db import WRITE_OPTION, UnitOfWork, unit_of_work
from orchestrator.store.events import add_event, hold_chain, insert_event
from orchestrator.store.people import approver_lapse
from orchestrator.store.tables import (
    ApprovalRow,
    CheckpointRow,
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
        self, key: str | None, saga_id: str | None, version_digest: str | None, *, hold: bool = False
    ) -> AuthorizationReads:
        if not key and saga_id is None:
            return NO_READS
        if hold:
            # The reads open the call's first transaction; the intent (or the refusal) commits it.
            tx = CallTx(self.engine)
            try:
                return _reads(tx.unit().session, key, saga_id, version_digest)._replace(tx=tx)
            except BaseException:
                tx.release()
                raise
        with Session(self.engine) as s:
            return _reads(s, key, saga_id, version_digest)

    def release(self, tx: Any) -> None:
        if isinstance(tx, CallTx):
            tx.release()

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
        charge: Charge | None = None,
        tx: Any = None,
    ) -> str:
        with _unit(self.engine, tx) as uow:
            if charge is not None:
                charge_budget(uow.session, charge)
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
        guard: Callable[[Any], None] | None = None,
        charge: Charge | None = None,
        tx: Any = None,
    ) -> str:
        now = utcnow()
        key = state.idempotency_key
        try:
            with _unit(self.engine, tx) as uow:
                s = uow.session
                if saga_id is not None:
                    # Serialize effects of one saga: the checkpoint chain never forks.
                    s.get(SagaRow, saga_id, with_for_update=True)
                if guard is not None:
                    guard(uow)
                if charge is not None:
                    charge_budget(s, charge)
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
        tx: Any = None,
    ) -> str:
        with _unit(self.engine, tx) as uow:
            s = uow.session
            if event.get("saga_id") is not None:
                hold_chain(s, event["saga_id"])  # the saga before the ledger row, as begin_effect locks them
            row = s.get(LedgerRow, key, with_for_update=True)
            if row is not None:
                row.status = ledger_status
                row.result = result
                row.updated_at = utcnow()
                s.add(row)
            ev = add_event(s, **event)
            if row is not None:
                row.event_id = ev.event_id
            if hook is not None and ledger_status == LedgerStatus.DONE:
                hook(uow)
            return ev.event_id

    def reconcile(
        self,
        key: str,
        outcome: Literal["confirmed", "absent"],
        receipt: dict[str, Any] | None = None,
        *,
        actor: str = "person",
        reason: str = "reconciled",
        detail: dict[str, Any] | None = None,
        within: Any = None,
    ) -> None:
        with self._joined(within) as uow:
            s = uow.session
            found = self.ledger_get(key) if within is None else None
            if found is not None and found.saga_id is not None:
                hold_chain(s, found.saga_id)  # the saga before the ledger row, as everywhere
            row = s.get(LedgerRow, key, with_for_update=True)
            if row is None:
                raise NotFound(f"no ledger row {key}", key=key)
            confirmed = outcome == "confirmed"
            row.status = LedgerStatus.DONE if confirmed else LedgerStatus.ABSENT
            row.result = dict(receipt or {"reconciled_by": actor}) if confirmed else None
            row.updated_at = utcnow()
            s.add(row)
            ev = add_event(
                s,
                saga_id=row.saga_id,
                actor=actor,
                kind="reconcile",
                status=outcome,
                tool=row.tool,
                detail={**(detail or {}), "key": key, "reason": reason, "outcome": outcome},
            )
            row.event_id = ev.event_id

    def mark_uncertain(self, key: str, *, within: Any = None) -> bool:
        with self._joined(within) as uow:
            row = uow.session.get(LedgerRow, key, with_for_update=True)
            if row is None or row.status not in (LedgerStatus.PENDING, LedgerStatus.UNCERTAIN):
                return False
            row.status = LedgerStatus.UNCERTAIN
            row.updated_at = utcnow()
            uow.session.add(row)
            return True

    @contextmanager
    def _joined(self, within: Any) -> Iterator[UnitOfWork]:
        """The caller's unit of work when given (it commits), else a new one."""
        if within is not None:
            if not isinstance(within, UnitOfWork):
                raise TypeError(f"within must be a UnitOfWork, not {type(within).__name__}")
            yield within
            return
        with unit_of_work(self.engine) as uow:
            yield uow


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
def _unit(engine: Engine, tx: Any) -> Iterator[UnitOfWork]:
    """The call's transaction on its pinned connection when given, else a unit of work of its own."""
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


def _reads(
    s: Session, key: str | None, saga_id: str | None, version_digest: str | None
) -> AuthorizationReads:
    return AuthorizationReads(
        ledger=_ledger_get(s, key) if key else None,
        saga_session=_saga_session(s, saga_id) if saga_id is not None else None,
        approval=_find_approval(s, saga_id, version_digest)
        if saga_id is not None and version_digest is not None
        else None,
    )


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
                status=LedgerStatus.PENDING,
                claimed_until=until,
            )
        )
        s.flush()
        return
    if row.args_digest != state.args_digest:
        raise IdempotencyConflict(f"key {key} was used with other arguments", key=key)
    if (
        row.status == LedgerStatus.PENDING
        and row.claimed_until is not None
        and _aware(row.claimed_until) > now
    ):
        raise KeyInFlight(f"key {key} is in flight", key=key)
    if row.status not in RESTARTABLE:
        raise IdempotencyConflict(f"key {key} is {row.status}", key=key)
    row.status = LedgerStatus.PENDING
    row.attempts += 1
    row.claimed_until = until
    row.updated_at = now
    s.add(row)


__all__ = ["SqlHarnessStore", "approval_row", "add_event", "approval_view", "insert_event", "new_id"]
