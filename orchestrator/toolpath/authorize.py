"""Authorize: who, then what. Role permission, the handle, the policy, the approval (invariant 2).

The caller's role is checked before any approval is read; then the capability
handle it acts under (`harness.handles.check`: action, resource, expiry); then the key's
ledger row, the saga's session and the approval are read together, and the
pure `decide()` says reject, wait for a person, or go on. What it learnt
(ledger row, approval id and request) rides on the call to the ledger wrapper.
The authorization phase stays open: the ledger wrapper's intent is part of it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from orchestrator.harness.approvals import ApprovalRequest
from orchestrator.harness.handles import CallView, check, counted_use
from orchestrator.harness.ledger_status import LedgerStatus
from orchestrator.harness.policy import Action, AwaitApproval, PolicyState, Reject, decide
from orchestrator.harness.ports import NO_READS, AuthorizationReader, AuthorizationReads
from orchestrator.harness.principals import tool_refusal
from orchestrator.harness.spec import Refusal, Risk, ToolResult
from orchestrator.toolpath.answers import Answers
from orchestrator.toolpath.call import Call, Step
from telemetry import names


class Authorize:
    def __init__(
        self,
        next: Step,
        store: AuthorizationReader,
        *,
        signing_key: bytes,
        clock: Callable[[], datetime],
        answers: Answers,
    ) -> None:
        self.next = next
        self.store = store
        self._key = signing_key
        self.clock = clock
        self.answers = answers

    def __call__(self, c: Call) -> ToolResult:
        c.phases.enter(names.AUTHORIZATION)
        c.times.authorized_at = self.clock()
        who = tool_refusal(c.caller.principal, c.spec.name)
        if who is not None:
            return self.answers.refuse_call(c, who, Refusal.PERMISSION)
        held = self._handle(c)
        if held is not None:
            return self.answers.refuse_call(c, held, Refusal.POLICY)
        scope = approval_scope(c)
        # The ledger row, the saga's session and the approval, read together (one read).
        # A write's reads begin the transaction its intent commits (held; released below).
        # They also take the caller's saga's lock, which whatever the call writes next needs.
        lock = c.caller.saga_id
        if scope is not None:
            reads = self.store.authorization_reads(c.key, scope[0], scope[1], hold=True, lock=lock)
        elif c.key:
            reads = self.store.authorization_reads(c.key, None, None, hold=True, lock=lock)
        else:
            reads = NO_READS
        c.tx = reads.tx
        try:
            return self._decide(c, reads)
        finally:
            self.store.release(reads.tx)

    def _handle(self, c: Call) -> str | None:
        """Why the caller's capability handle does not allow this call (None: it does, or the
        caller acts without one); a counted call learns the use its record spends."""
        if c.caller.handle_refusal is not None:
            return c.caller.handle_refusal
        handle = c.caller.handle
        if handle is None:
            return None
        action = c.spec.needed_capability
        fault = check(handle, call_view(c), now=self.clock())
        if fault is not None:
            return fault.text
        c.use = counted_use(handle, action=action, tool=c.spec.name, args_digest=c.digest)
        return None

    def _decide(self, c: Call, reads: AuthorizationReads) -> ToolResult:
        ledger = reads.ledger
        if ledger is not None and ledger.args_digest != c.digest:
            return self.answers.refuse_call(
                c, f"idempotency key {c.key} was used with other arguments", Refusal.CONFLICT
            )
        request = approval_request(approval_scope(c), reads.saga_session)
        state = PolicyState(
            capabilities=c.caller.capabilities,
            needed_capability=c.spec.needed_capability,
            approval_request=request,
            approval=reads.approval if request else None,
            replay=ledger is not None and ledger.status == LedgerStatus.DONE,
            now=self.clock(),
        )
        action = Action(
            tool=c.spec.name, risk=c.spec.risk, arguments=c.args, args_digest=c.digest, idempotency_key=c.key
        )
        decision = decide(state, action, key=self._key)
        if isinstance(decision, Reject):
            return self.answers.refuse_call(c, decision.reason, decision.refusal)
        if isinstance(decision, AwaitApproval):
            return self.answers.await_approval(c, decision)
        c.ledger, c.approval_id, c.request = ledger, decision.approval_id, request
        return self.next(c)


def call_view(c: Call) -> CallView:
    """What a handle is checked against: the call's capability and tool, and the saga and
    destination its arguments name (`saga_id`, `destination`), when they name one."""
    saga_id = getattr(c.model, "saga_id", None)
    destination = getattr(c.model, "destination", None)
    return CallView(
        action=c.spec.needed_capability,
        tool=c.spec.name,
        saga_id=saga_id if isinstance(saga_id, str) else None,
        destination=destination if isinstance(destination, str) else None,
    )


def approval_scope(c: Call) -> tuple[str, str, str] | None:
    """(saga id, version digest, destination) a high-risk call needs approved."""
    if c.spec.risk is not Risk.HIGH_RISK or c.spec.approval_scope is None:
        return None
    return c.spec.approval_scope(c.model)


def approval_request(scope: tuple[str, str, str] | None, session: str | None) -> ApprovalRequest | None:
    if scope is None:
        return None
    saga_id, digest, destination = scope
    return ApprovalRequest(
        saga_id=saga_id,
        version_digest=digest,
        destination=destination,
        session=session or "",
        execution=session or "",
    )


__all__ = ["Authorize", "approval_request", "approval_scope", "call_view"]
