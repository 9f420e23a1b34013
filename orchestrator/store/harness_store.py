"""The harness's store on SQL: events, approvals, the ledger, checkpoints.

`begin_effect` is the pre-execute record (invariant 4): approval consumption,
the chained checkpoint, the ledger row `pending` and the intent event commit
in one transaction before the executor runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Literal

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from orchestrator.core.errors import (
    IdempotencyConflict,
    NotFound,
)
from orchestrator.harness.approvals import ApprovalView
from orchestrator.harness.budget import Charge
from orchestrator.harness.checkpoints import AgentState
from orchestrator.harness.ledger_status import LedgerStatus
from orchestrator.harness.ports import NO_READS, AuthorizationReads, EventTimes, LedgerView
from orchestrator.store import harness_rows as rows
from orchestrator.store.budget import charge as charge_budget
from orchestrator.store.db import UnitOfWork, unit_of_work
from orchestrator.store.events import add_event, hold_chain, insert_event
from orchestrator.store.harness_rows import approval_row, approval_view
from orchestrator.store.tables import (
    LedgerRow,
    new_id,
    utcnow,
)


class SqlHarnessStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def saga_session(self, saga_id: str) -> str | None:
        with Session(self.engine) as s:
            return rows.saga_session_of(s, saga_id)

    def find_approval(self, saga_id: str, version_digest: str) -> ApprovalView | None:
        with Session(self.engine) as s:
            return rows.approval_of(s, saga_id, version_digest)

    def ledger_get(self, key: str) -> LedgerView | None:
        with Session(self.engine) as s:
            return rows.ledger_row(s, key)

    def authorization_reads(
        self,
        key: str | None,
        saga_id: str | None,
        version_digest: str | None,
        *,
        hold: bool = False,
        lock: str | None = None,
    ) -> AuthorizationReads:
        if not key and saga_id is None:
            return NO_READS
        if hold:
            # The reads open the call's first transaction; the intent (or the refusal) commits it.
            tx = rows.CallTx(self.engine)
            try:
                session = tx.unit().session
                reads = rows.read_for_authorization(session, key, saga_id, version_digest, lock)
                return reads._replace(tx=tx)
            except BaseException:
                tx.release()
                raise
        with Session(self.engine) as s:
            return rows.read_for_authorization(s, key, saga_id, version_digest)

    def release(self, tx: Any) -> None:
        if isinstance(tx, rows.CallTx):
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
        fields: dict[str, Any] = {
            "event_id": new_id(),
            "saga_id": saga_id,
            "actor": actor,
            "kind": kind,
            "status": status,
            "tool": tool,
            "detail": detail or {},
            "times": times,
            "parent_event_id": parent_event_id,
        }
        with rows.call_unit(self.engine, tx) as uow:
            if charge is None:
                event_id = insert_event(uow.session, **fields)
            else:  # the event goes with the charge, the saga locked before its budget row
                charge_budget(uow.session, charge, event=fields)
                event_id = fields["event_id"]
            if hook is not None:
                hook(uow)
            return event_id

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
            with rows.call_unit(self.engine, tx) as uow:
                s = uow.session
                # Serialize effects of one saga (its row's lock): the chains never fork.
                head = rows.hold_chains(s, saga_id) if saga_id is not None else None
                if guard is not None:
                    guard(uow)
                rows.write_intent(
                    s,
                    rows.Intent(
                        saga_id=saga_id,
                        state=state,
                        head=head,
                        event={
                            "event_id": state.event_id,
                            "saga_id": saga_id,
                            "actor": actor,
                            "kind": "intent",
                            "status": "pending",
                            "tool": state.tool,
                            "detail": {
                                "key": key,
                                "args_digest": state.args_digest,
                                "approval_id": approval_id,
                            },
                            "times": times,
                        },
                        now=now,
                        until=now + timedelta(seconds=claim_seconds),
                        charge=charge,
                        approval_id=approval_id,
                        execution=execution or "",
                    ),
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
        with rows.call_unit(self.engine, tx) as uow:
            s = uow.session
            # The saga's lock first, then the ledger row, as begin_effect takes them.
            event_id = rows.finish_ledger(s, key, ledger_status, result, event)
            if hook is not None and ledger_status == LedgerStatus.DONE:
                hook(uow)
            return event_id

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


__all__ = ["SqlHarnessStore", "approval_row", "add_event", "approval_view", "insert_event", "new_id"]
