"""Answers: every `ToolResult` the path gives, with the event that records it.

Each wrapper that ends a call ends it here, so a refusal, a wait, an in-flight
answer and a finished call are recorded the same way whichever wrapper
stopped it. The store is the only writer (one transaction per answer).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from orchestrator.core.errors import PolicyRefused
from orchestrator.harness.budget import BudgetExhausted, Charge
from orchestrator.harness.ledger_status import LedgerStatus
from orchestrator.harness.policy import AwaitApproval
from orchestrator.harness.ports import EventChain, EventTimes, HeldTx, Ledger
from orchestrator.harness.spec import Refusal, Risk, ToolCall, ToolResult, ToolStatus
from orchestrator.toolpath.call import Call, Caller
from telemetry import names, spans


class Recorder(Ledger, EventChain, Protocol):
    """What answers write through: the event log, and the ledger for a finished effect."""


class Answers:
    def __init__(self, store: Recorder, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.clock = clock

    def refuse(
        self,
        proposal: ToolCall,
        caller: Caller,
        times: EventTimes,
        reason: str,
        refusal: Refusal,
        tx: HeldTx | None = None,
    ) -> ToolResult:
        times.authorized_at = times.authorized_at or self.clock()
        event_id = self.store.record_event(
            saga_id=caller.saga_id,
            actor=caller.actor,
            kind="tool_call",
            status=ToolStatus.REJECTED.value,
            tool=proposal.tool,
            detail={**ids(caller, proposal.call_id), "reason": reason},
            times=times,
            tx=tx,
        )
        return ToolResult(
            tool=proposal.tool,
            status=ToolStatus.REJECTED,
            reason=reason,
            event_id=event_id,
            call_id=proposal.call_id,
            refusal=refusal,
        )

    def refuse_call(self, c: Call, reason: str, refusal: Refusal) -> ToolResult:
        return self.refuse(c.proposal, c.caller, c.times, reason, refusal, c.tx)

    def lapsed(self, c: Call, reason: str) -> ToolResult:
        """The approver is no longer an active reviewer (wire form kept: ``approver_lapsed``)."""
        result = self.refuse_call(c, reason, Refusal.APPROVER_LAPSED)
        return result.model_copy(update={"output": {"approver_lapsed": True}})

    def in_flight(self, c: Call, retry_after: float) -> ToolResult:
        """Another call holds this key right now: a conflict, never a second call."""
        reason = f"another call holds key {c.key} in flight; ask again after its claim runs out"
        event_id = self.store.record_event(
            saga_id=c.caller.saga_id,
            actor=c.caller.actor,
            kind="tool_call",
            status=ToolStatus.REJECTED.value,
            tool=c.spec.name,
            detail={**ids(c.caller, c.proposal.call_id), "reason": reason, "key": c.key, "in_flight": True},
            times=c.times,
            tx=c.tx,
        )
        return ToolResult(
            tool=c.spec.name,
            status=ToolStatus.REJECTED,
            output={"in_flight": True, "retry_after": retry_after},  # the wire form; branch on `refusal`
            reason=reason,
            idempotency_key=c.key,
            event_id=event_id,
            call_id=c.proposal.call_id,
            refusal=Refusal.IN_FLIGHT,
            retry_after=retry_after,
        )

    def await_approval(self, c: Call, decision: AwaitApproval) -> ToolResult:
        want = decision.request
        output = {
            "saga_id": want.saga_id if want else None,
            "version_digest": want.version_digest if want else None,
            "destination": want.destination if want else None,
            "how": f"pressroom approve {want.saga_id if want else 'SAGA_ID'} --version N --as NAME",
        }
        event_id = self.store.record_event(
            saga_id=c.caller.saga_id,
            actor=c.caller.actor,
            kind="tool_call",
            status=ToolStatus.APPROVAL_REQUIRED.value,
            tool=c.spec.name,
            detail={**ids(c.caller, c.proposal.call_id), "reason": decision.reason, "key": c.key},
            times=c.times,
            tx=c.tx,
        )
        return ToolResult(
            tool=c.spec.name,
            status=ToolStatus.APPROVAL_REQUIRED,
            output=output,
            reason=decision.reason,
            refusal=decision.refusal,
            idempotency_key=c.key,
            event_id=event_id,
            call_id=c.proposal.call_id,
        )

    def finish(
        self,
        c: Call,
        status: ToolStatus,
        output: Any,
        reason: str | None,
        ledger_status: LedgerStatus | None,
        *,
        parent: str | None = None,
        charge: Charge | None = None,
        spend: Callable[[Any], None] | None = None,
    ) -> ToolResult:
        """The ack phase: record the result (ledger outcome, event, the tool's own record) in one commit.

        `parent`: the intent's event. `charge`: a read-only call's budget charge, in the same
        transaction; when the saga is spent the read's answer is withheld (nothing was changed).
        `spend`: a read-only call's capability handle use, in the same transaction; when the
        handle has no use left the read's answer is withheld too.
        """
        c.phases.enter(names.ACK)
        c.times.acked_at = self.clock()
        result = ToolResult(
            tool=c.spec.name,
            status=status,
            output=output,
            reason=reason,
            idempotency_key=c.key,
            call_id=c.proposal.call_id,
            refusal=Refusal.EXECUTOR if status is ToolStatus.REJECTED else None,
        )
        event: dict[str, Any] = {
            "saga_id": c.caller.saga_id,
            "actor": c.caller.actor,
            "kind": "tool_call",
            "status": status.value,
            "tool": c.spec.name,
            "detail": _detail(c, reason, output),
            "times": c.times,
            "parent_event_id": parent,
        }
        hook = None
        if c.spec.recorder is not None:
            recorder, ctx, model = c.spec.recorder, c.context(), c.model

            def hook(session: Any) -> None:
                recorder(session, ctx, model, result)

        if c.key and ledger_status is not None:
            stored = (
                output if isinstance(output, dict) else ({"value": output} if output is not None else None)
            )
            event_id = self.store.finish_effect(
                key=c.key, ledger_status=ledger_status, result=stored, event=event, hook=hook, tx=c.tx
            )
        else:
            applied = status in (ToolStatus.OK, ToolStatus.REPLAYED)
            try:
                event_id = self.store.record_event(
                    **event, hook=_both(spend, hook if applied else None), charge=charge, tx=c.tx
                )
            except BudgetExhausted as exc:
                c.phases.close()
                return self.refuse_call(c, str(exc), Refusal.BUDGET_EXHAUSTED)
            except PolicyRefused as exc:  # the handle had no use left for this read
                c.phases.close()
                return self.refuse_call(c, str(exc), Refusal.POLICY)
        c.phases.close()
        if status in (ToolStatus.ERROR, ToolStatus.UNCERTAIN):
            spans.mark_error(reason or status.value)
        return result.model_copy(update={"event_id": event_id})


def _both(
    first: Callable[[Any], None] | None, then: Callable[[Any], None] | None
) -> Callable[[Any], None] | None:
    if first is None or then is None:
        return first or then

    def hook(session: Any) -> None:
        first(session)
        then(session)

    return hook


def ids(caller: Caller, call_id: str) -> dict[str, str]:
    """The identities a call's record keeps together: the call id (a model's tool-call id, an
    MCP client's JSON-RPC request id) and the request that ran it (the delivery of a role's
    turn); the business key is added where the call has one."""
    found = {"call_id": call_id}
    if caller.request_id:
        found["request_id"] = caller.request_id
    return found


def _detail(c: Call, reason: str | None, output: Any) -> dict[str, Any]:
    detail: dict[str, Any] = {**ids(c.caller, c.proposal.call_id), "args_digest": c.digest}
    if c.key:
        detail["key"] = c.key
    if reason:
        detail["reason"] = reason
    if isinstance(output, dict) and c.spec.risk is Risk.HIGH_RISK:
        detail["receipt"] = output
    return detail


__all__ = ["Answers"]
