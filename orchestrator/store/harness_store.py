"""The harness's store on SQL: events, approvals, the ledger, checkpoints.

`SqlHarnessStore` implements the harness ports (`AuthorizationReader`, `Approvals`,
`Ledger`, `EventChain`) on one engine, reading the time from its `Clock`.

`begin_effect` is the pre-execute record (invariant 4): approval consumption,
the chained checkpoint, the ledger row `pending` and the intent event commit
in one transaction before the executor runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from orchestrator.core.clock import DATABASE_TIME, Clock
from orchestrator.core.errors import IdempotencyConflict
from orchestrator.harness.approvals import ApprovalView
from orchestrator.harness.budget import Charge
from orchestrator.harness.checkpoints import AgentState
from orchestrator.harness.ledger_status import LedgerStatus
from orchestrator.harness.ports import NO_READS, AuthorizationReads, EventTimes, HeldTx, LedgerView
from orchestrator.store import harness_rows as rows
from orchestrator.store import ledger_rows
from orchestrator.store.approval_rows import approval_of, approval_row, approval_view
from orchestrator.store.budget import charge as charge_budget
from orchestrator.store.events import add_event, hold_chain, insert_event
from orchestrator.store.harness_tx import CallTx, call_unit, joined
from orchestrator.store.tables import new_id


class SqlHarnessStore:
    def __init__(self, engine: Engine, *, clock: Clock = DATABASE_TIME) -> None:
        self.engine = engine
        self.clock = clock

    def saga_session(self, saga_id: str) -> str | None:
        with Session(self.engine) as s:
            return rows.saga_session_of(s, saga_id)

    def find_approval(self, saga_id: str, version_digest: str) -> ApprovalView | None:
        with Session(self.engine) as s:
            return approval_of(s, saga_id, version_digest)

    def ledger_get(self, key: str) -> LedgerView | None:
        with Session(self.engine) as s:
            return ledger_rows.ledger_row(s, key)

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
            tx = CallTx(self.engine)
            try:
                session = tx.unit().session
                reads = rows.read_for_authorization(session, key, saga_id, version_digest, lock)
                return reads._replace(tx=tx)
            except BaseException:
                tx.release()
                raise
        with Session(self.engine) as s:
            return rows.read_for_authorization(s, key, saga_id, version_digest)

    def release(self, tx: HeldTx | None) -> None:
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
        tx: HeldTx | None = None,
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
        with call_unit(self.engine, tx) as uow:
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
        tx: HeldTx | None = None,
    ) -> str:
        now = self.clock.now()
        key = state.idempotency_key
        try:
            with call_unit(self.engine, tx) as uow:
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
        tx: HeldTx | None = None,
    ) -> str:
        with call_unit(self.engine, tx) as uow:
            s = uow.session
            # The saga's lock first, then the ledger row, as begin_effect takes them.
            event_id = ledger_rows.finish_ledger(s, key, ledger_status, result, event, self.clock.now())
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
        within: HeldTx | None = None,
    ) -> None:
        with joined(self.engine, within) as uow:
            s = uow.session
            found = self.ledger_get(key) if within is None else None
            if found is not None and found.saga_id is not None:
                hold_chain(s, found.saga_id)  # the saga before the ledger row, as everywhere
            ledger_rows.settle_by_person(
                s, key, outcome, receipt, actor=actor, reason=reason, detail=detail, now=self.clock.now()
            )

    def mark_uncertain(self, key: str, *, within: HeldTx | None = None) -> bool:
        with joined(self.engine, within) as uow:
            return ledger_rows.mark_uncertain(uow.session, key, self.clock.now())

    def prune(
        self,
        saga_ids: Sequence[str],
        cutoff: datetime,
        *,
        within: HeldTx | None = None,
        count_only: bool = False,
    ) -> int:
        with joined(self.engine, within) as uow:
            return ledger_rows.prune(uow.session.connection(), saga_ids, cutoff, count_only=count_only)


__all__ = ["SqlHarnessStore", "approval_row", "add_event", "approval_view", "insert_event", "new_id"]
