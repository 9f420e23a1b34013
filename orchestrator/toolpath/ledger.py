"""Ledger: one effect per business key (invariants 3, 4 and 5).

Before the call: a recorded key answers from the record (`replayed`), an
`uncertain` one waits for a person, one held by another call is in flight, a
`pending` one whose claim ran out is settled by asking the destination's
status, never by guessing. A write then commits its intent (checkpoint,
ledger `pending`, approval consumption, budget charge) in one transaction
before the executor runs, and its result in a second; a read has one (its
result, with its budget charge).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from orchestrator.core.clock import DATABASE_TIME
from orchestrator.core.errors import (
    ApprovalRefused,
    ApproverLapsed,
    IdempotencyConflict,
    KeyInFlight,
    PolicyRefused,
    PressroomError,
)
from orchestrator.harness import ports
from orchestrator.harness.budget import BudgetExhausted, Charge
from orchestrator.harness.checkpoints import AgentState
from orchestrator.harness.ledger_status import LedgerStatus
from orchestrator.harness.ports import LedgerView
from orchestrator.harness.spec import Refusal, Risk, ToolResult, ToolStatus
from orchestrator.toolpath.answers import Answers
from orchestrator.toolpath.call import Call
from orchestrator.toolpath.execute import Attempt, Executor


class Ledger:
    def __init__(
        self,
        next: Executor,
        store: ports.Ledger,
        answers: Answers,
        *,
        claim_seconds: float,
        saga_budget: int = 0,
        clock: Callable[[], datetime] = DATABASE_TIME.now,
        uses: ports.HandleUses | None = None,
    ) -> None:
        self.next = next
        self.store = store
        self.answers = answers
        # How long a pending key is held by the call that wrote it: longer than
        # any executor may take (the destination timeout bounds publishes).
        self.claim_seconds = claim_seconds
        self.saga_budget = saga_budget
        # Claims are deadlines the store writes by its clock: compared with the same clock.
        self.clock = clock
        # Where a counted write's handle use is spent, in its intent's transaction.
        self.uses = uses

    def __call__(self, c: Call) -> ToolResult:
        if c.ledger is not None and c.ledger.status in (
            LedgerStatus.DONE,
            LedgerStatus.UNCERTAIN,
            LedgerStatus.PENDING,
        ):
            settled = self._settle(c, c.ledger)
            if settled is not None:
                return settled
        if c.spec.risk is Risk.READ_ONLY:
            # Authorized and closed: a read's send and ack are siblings of its authorization.
            attempt = self.next.run(c)
            status, reason = _read_status(attempt)
            spend = self._spend(c) if status is ToolStatus.OK else None
            return self.answers.finish(
                c, status, attempt.output, reason, None, charge=self.charge(c), spend=spend
            )
        intent = self._begin(c)
        if isinstance(intent, ToolResult):
            return intent
        return self._record(c, self.next.run(c), intent)

    def charge(self, c: Call) -> Charge | None:
        """What this call costs its saga: agents' calls only, never a person's command."""
        if not c.caller.budgeted or c.caller.saga_id is None:
            return None
        usage = c.caller.usage
        return Charge(saga_id=c.caller.saga_id, limit=self.saga_budget, tokens=usage.tokens, cost=usage.cost)

    def _settle(self, c: Call, ledger: LedgerView) -> ToolResult | None:
        """Answer from the record; None means the step may run (again)."""
        if ledger.status == LedgerStatus.DONE:
            return self.answers.finish(c, ToolStatus.REPLAYED, ledger.result, None, None)
        if ledger.status == LedgerStatus.UNCERTAIN:
            reason = "outcome unknown: awaiting reconcile by a person"
            return self.answers.finish(c, ToolStatus.UNCERTAIN, None, reason, None)
        if ledger.claimed_until is not None and ledger.claimed_until > self.clock():
            return self.answers.in_flight(c, self.claim_seconds)
        # pending, its claim run out, no result: a crash between intent and record. Ask, never guess.
        answer = self.next.probe(c)
        if answer.kind == "applied":
            return self.answers.finish(c, ToolStatus.OK, answer.receipt, None, LedgerStatus.DONE)
        if answer.kind == "absent":
            return None
        if c.spec.risk is Risk.REVERSIBLE_WRITE:
            # Idempotent by its contract: running it again under the same key is the same effect
            # once, so a crash leftover is run again rather than left for a person.
            return None
        reason = f"intent found with no result; {answer.detail}"
        return self.answers.finish(c, ToolStatus.UNCERTAIN, None, reason, LedgerStatus.UNCERTAIN)

    def _begin(self, c: Call) -> ToolResult | str:
        """Commit the intent (the pre-execute record): its id, or the refusal that stopped it."""
        ledger = c.ledger
        try:
            return self.store.begin_effect(
                saga_id=c.caller.saga_id,
                actor=c.caller.actor,
                state=AgentState(
                    event_id=uuid.uuid4().hex,
                    step=ledger.attempts + 1 if ledger else 1,
                    tool=c.spec.name,
                    idempotency_key=c.key,
                    args_digest=c.digest,
                    messages=[{"call_id": c.proposal.call_id, "arguments": c.args}],
                    pending_approval=c.approval_id,
                ),
                approval_id=c.approval_id,
                execution=c.request.execution if c.request else None,
                times=c.times,
                claim_seconds=self.claim_seconds,
                guard=self._guard(c),
                charge=self.charge(c),
                tx=c.tx,
            )
        except KeyInFlight:
            return self.answers.in_flight(c, self.claim_seconds)
        except IdempotencyConflict as exc:
            return self.answers.refuse_call(c, str(exc), Refusal.CONFLICT)
        except ApproverLapsed as exc:
            return self.answers.lapsed(c, str(exc))
        except ApprovalRefused as exc:
            return self.answers.refuse_call(c, str(exc), Refusal.APPROVAL_STALE)
        except BudgetExhausted as exc:
            return self.answers.refuse_call(c, str(exc), Refusal.BUDGET_EXHAUSTED)
        except PolicyRefused as exc:  # a capability handle with no use left
            return self.answers.refuse_call(c, str(exc), Refusal.POLICY)
        except PressroomError as exc:  # a pre-execute check said no: nothing pending, nothing sent
            return self.answers.refuse_call(c, str(exc), Refusal.BOUND)

    def _spend(self, c: Call) -> Callable[[Any], None] | None:
        """Spend the handle use the call counts, inside the transaction that records it (a
        write's intent, a read's result), or None when the call counts none."""
        use, uses = c.use, self.uses
        if use is None:
            return None

        def spend(tx: Any) -> None:
            if uses is None:  # fail closed: a count nobody keeps is no count
                raise PolicyRefused(f"{use.refusal()}: this path keeps no counts")
            uses.spend(tx, use)

        return spend

    def _guard(self, c: Call) -> Callable[[object], None] | None:
        """The tool's checks that must hold when its intent commits, as one guard; first the
        handle use the call spends (counted there, so a refused intent spends nothing)."""
        checks, spend = c.spec.pre_execute, self._spend(c)
        if not checks and spend is None:
            return None
        ctx, model = c.context(), c.model

        def guard(tx: object) -> None:
            if spend is not None:
                spend(tx)
            for check in checks:
                check(tx, ctx, model)

        return guard

    def _record(self, c: Call, attempt: Attempt, intent_id: str) -> ToolResult:
        finish = self.answers.finish
        if attempt.outcome == "applied":
            return finish(c, ToolStatus.OK, attempt.output, None, LedgerStatus.DONE, parent=intent_id)
        if attempt.outcome == "refused":
            return finish(c, ToolStatus.REJECTED, None, attempt.reason, LedgerStatus.FAILED, parent=intent_id)
        if attempt.outcome == "failed":
            return finish(c, ToolStatus.ERROR, None, attempt.reason, LedgerStatus.FAILED, parent=intent_id)
        # Maybe applied: ask the destination before saying anything.
        answer = self.next.probe(c)
        if answer.kind == "applied":
            return finish(c, ToolStatus.OK, answer.receipt, None, LedgerStatus.DONE, parent=intent_id)
        if answer.kind == "absent":
            why = f"{attempt.reason}; status: not applied"
            return finish(c, ToolStatus.ERROR, None, why, LedgerStatus.FAILED, parent=intent_id)
        why = f"{attempt.reason}; {answer.detail}"
        return finish(c, ToolStatus.UNCERTAIN, None, why, LedgerStatus.UNCERTAIN, parent=intent_id)


def _read_status(attempt: Attempt) -> tuple[ToolStatus, str | None]:
    if attempt.outcome == "applied":
        return ToolStatus.OK, None
    if attempt.outcome == "refused":  # the read was not allowed, and did not happen
        return ToolStatus.REJECTED, attempt.reason
    return ToolStatus.ERROR, attempt.reason


__all__ = ["Ledger"]
