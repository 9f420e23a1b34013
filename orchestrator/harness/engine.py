"""The engine: the one path every tool call takes, and the bounded loop.

``proposal → bounded parse → validate → policy/approval → pre-execute
checkpoint → execute → record → next state``. Approval, ledger and tracing
wrap the executor here; entry points (Celery tasks, the MCP server, the saga
runner) are handed a `Harness`, never a bare executor.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry.trace import SpanKind
from pydantic import BaseModel, ValidationError

from orchestrator.core.errors import (
    ApprovalRefused,
    ApproverLapsed,
    DestinationError,
    IdempotencyConflict,
    PressroomError,
    Refused,
)
from orchestrator.harness.approvals import ApprovalRequest
from orchestrator.harness.capabilities import Capabilities
from orchestrator.harness.checkpoints import AgentState
from orchestrator.harness.digests import args_digest
from orchestrator.harness.parse import DEFAULT_LIMITS, ParseLimits, ParseRefused, bounded_parse
from orchestrator.harness.policy import Action, AwaitApproval, PolicyState, Reject, decide
from orchestrator.harness.ports import NO_READS, EventTimes, HarnessStore, LedgerView
from orchestrator.harness.principals import Principal, acting, tool_refusal
from orchestrator.harness.registry import Registry
from orchestrator.harness.spec import (
    NO_PROBE,
    ProbeAnswer,
    Refusal,
    Risk,
    ToolCall,
    ToolContext,
    ToolResult,
    ToolSpec,
    ToolStatus,
)
from telemetry import names, spans


@dataclass(frozen=True)
class Caller:
    """Who is calling and what they may do. Never widened by tool output."""

    actor: str
    capabilities: Capabilities
    saga_id: str | None = None
    span_attributes: dict[str, Any] = field(default_factory=dict)
    # The person behind the call (MCP); None: the saga's own agent, bound by its capabilities.
    principal: Principal | None = None


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Call:
    spec: ToolSpec
    proposal: ToolCall
    caller: Caller
    args: dict[str, Any]
    model: BaseModel
    digest: str
    key: str | None
    times: EventTimes
    attrs: dict[str, Any]


class Harness:
    """Validates, authorizes, checkpoints, executes and records tool calls."""

    def __init__(
        self,
        registry: Registry,
        store: HarnessStore,
        *,
        signing_key: bytes,
        limits: ParseLimits = DEFAULT_LIMITS,
        clock: Callable[[], datetime] = _now,
        claim_seconds: float = 30.0,
    ) -> None:
        self.registry = registry
        self.store = store
        self._key = signing_key
        self._limits = limits
        self._clock = clock
        # How long a pending key is held by the call that wrote it: longer than
        # any executor may take (the destination timeout bounds publishes).
        self._claim_seconds = claim_seconds

    # -- the one path ------------------------------------------------------
    def call(self, proposal: ToolCall, caller: Caller) -> ToolResult:
        attrs = {names.ATTR_TOOL: proposal.tool, **caller.span_attributes}
        if caller.saga_id:
            attrs[names.ATTR_SAGA_ID] = caller.saga_id
        # A person's call stamps its events with them; an agent's call keeps the person
        # whose command it serves (a cancel's compensations), or none (a worker's message).
        person = acting(caller.principal) if caller.principal is not None else nullcontext()
        with person, spans.action_span(proposal.tool, attrs):
            times = EventTimes(proposed_at=self._clock())
            with spans.phase(names.PROPOSAL, attrs):
                prepared = self._prepare(proposal, caller, times, attrs)
                spans.annotate(attrs)  # risk, key and destination, known once the arguments parse
            if isinstance(prepared, ToolResult):
                return prepared
            spans.annotate(attrs)
            return self._authorize_and_run(prepared)

    def _prepare(
        self, proposal: ToolCall, caller: Caller, times: EventTimes, attrs: dict[str, Any]
    ) -> _Call | ToolResult:
        spec = self.registry.get(proposal.tool)
        if spec is None:
            known = ", ".join(self.registry.names())
            return self._refuse(proposal, caller, times, f"unknown tool {proposal.tool!r}; known: {known}")
        attrs[names.ATTR_RISK] = spec.risk.value
        try:
            args = bounded_parse(proposal.arguments, self._limits)
        except ParseRefused as exc:
            return self._refuse(proposal, caller, times, str(exc))
        try:
            model = spec.input_model.model_validate(args)
        except ValidationError as exc:
            return self._refuse(proposal, caller, times, _summarise(exc))
        key = spec.key(model) if spec.key is not None else None
        if key:
            attrs[names.ATTR_IDEMPOTENCY_KEY] = key
        destination = spans.destination_attribute(getattr(model, "destination", None))
        if destination:
            attrs[names.ATTR_DESTINATION] = destination
        # The digest covers the validated arguments, defaults included, so the
        # same call spelled two ways is the same call.
        digest = args_digest(model.model_dump(mode="json"))
        return _Call(spec, proposal, caller, args, model, digest, key, times, attrs)

    def _authorize_and_run(self, c: _Call) -> ToolResult:
        outcome = self._authorize(c)
        if outcome is None:
            # Authorized and closed: a read's send and ack are siblings of its authorization, as a write's are.
            return self._run_read_only(c)
        if isinstance(outcome, ToolResult):
            return outcome
        return self._execute(c, outcome)

    def _authorize(self, c: _Call) -> ToolResult | str | None:
        """The authorization phase: a result that ends the call, the intent id of a write, or None for a read."""
        with spans.phase(names.AUTHORIZATION, c.attrs):
            c.times.authorized_at = self._clock()
            # Who, before what: the caller's role is checked before any approval is read.
            who = tool_refusal(c.caller.principal, c.spec.name)
            if who is not None:
                return self._refuse(c.proposal, c.caller, c.times, who)
            scope = self._approval_scope(c)
            # The ledger row, the saga's session and the approval, read together.
            if scope is not None:
                reads = self.store.authorization_reads(c.key, scope[0], scope[1])
            elif c.key:
                reads = self.store.authorization_reads(c.key, None, None)
            else:
                reads = NO_READS
            ledger = reads.ledger
            if ledger is not None and ledger.args_digest != c.digest:
                return self._refuse(
                    c.proposal, c.caller, c.times, f"idempotency key {c.key} was used with other arguments"
                )
            request = self._approval_request(scope, reads.saga_session)
            state = PolicyState(
                capabilities=c.caller.capabilities,
                needed_capability=c.spec.needed_capability,
                approval_request=request,
                approval=reads.approval if request else None,
                replay=ledger is not None and ledger.status == "done",
                now=self._clock(),
            )
            action = Action(
                tool=c.spec.name,
                risk=c.spec.risk,
                arguments=c.args,
                args_digest=c.digest,
                idempotency_key=c.key,
            )
            decision = decide(state, action, key=self._key)
            if isinstance(decision, Reject):
                return self._refuse(c.proposal, c.caller, c.times, decision.reason)
            if isinstance(decision, AwaitApproval):
                return self._await_approval(c, decision)
            if ledger is not None and ledger.status in ("done", "uncertain", "pending"):
                settled = self._settle_known_key(c, ledger)
                if settled is not None:
                    return settled
            if c.spec.risk is Risk.READ_ONLY:
                return None
            return self._begin(c, ledger, decision.approval_id, request)

    def _begin(
        self, c: _Call, ledger: LedgerView | None, approval_id: str | None, request: ApprovalRequest | None
    ) -> ToolResult | str:
        """Commit the intent (the pre-execute record): its id, or the refusal that stopped it."""
        try:
            intent_id = self.store.begin_effect(
                saga_id=c.caller.saga_id,
                actor=c.caller.actor,
                state=AgentState(
                    event_id=uuid.uuid4().hex,
                    step=ledger.attempts + 1 if ledger else 1,
                    tool=c.spec.name,
                    idempotency_key=c.key,
                    args_digest=c.digest,
                    messages=[{"call_id": c.proposal.call_id, "arguments": c.args}],
                    pending_approval=approval_id,
                ),
                approval_id=approval_id,
                execution=request.execution if request else None,
                times=c.times,
                claim_seconds=self._claim_seconds,
                guard=self._pre_execute(c),
            )
        except IdempotencyConflict as exc:
            if getattr(exc, "in_flight", False):
                return self._in_flight(c)
            return self._refuse(c.proposal, c.caller, c.times, str(exc))
        except ApproverLapsed as exc:
            lapsed = self._refuse(c.proposal, c.caller, c.times, str(exc))
            return lapsed.model_copy(
                update={"output": {"approver_lapsed": True}, "refusal": Refusal.APPROVER_LAPSED}
            )
        except ApprovalRefused as exc:
            return self._refuse(c.proposal, c.caller, c.times, str(exc))
        except PressroomError as exc:  # a pre-execute check said no: nothing pending, nothing sent
            return self._refuse(c.proposal, c.caller, c.times, str(exc))
        return intent_id

    # -- pieces of the path ------------------------------------------------
    def _approval_scope(self, c: _Call) -> tuple[str, str, str] | None:
        """(saga id, version digest, destination) a high-risk call needs approved."""
        if c.spec.risk is not Risk.HIGH_RISK or c.spec.approval_scope is None:
            return None
        return c.spec.approval_scope(c.model)

    def _pre_execute(self, c: _Call) -> Callable[[Any], None] | None:
        """The tool's checks that must hold when its intent commits, as one guard."""
        checks = c.spec.pre_execute
        if not checks:
            return None
        ctx, model = self._context(c), c.model

        def guard(tx: Any) -> None:
            for check in checks:
                check(tx, ctx, model)

        return guard

    @staticmethod
    def _approval_request(scope: tuple[str, str, str] | None, session: str | None) -> ApprovalRequest | None:
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

    def _settle_known_key(self, c: _Call, ledger: LedgerView) -> ToolResult | None:
        """Answer from the record; None means the step may run (again)."""
        if ledger.status == "done":
            return self._finish(c, ToolStatus.REPLAYED, ledger.result, None, ledger_status=None)
        if ledger.status == "uncertain":
            return self._finish(
                c,
                ToolStatus.UNCERTAIN,
                None,
                "outcome unknown: awaiting reconcile by a person",
                ledger_status=None,
            )
        # Claims are wall-clock deadlines written by the store; compare with the wall clock.
        if ledger.claimed_until is not None and ledger.claimed_until > datetime.now(UTC):
            return self._in_flight(c)
        # pending, its claim run out, no result: a crash between intent and record. Ask, never guess.
        answer = self._probe(c)
        if answer.kind == "applied":
            return self._finish(c, ToolStatus.OK, answer.receipt, None, ledger_status="done")
        if answer.kind == "absent":
            return None
        return self._finish(
            c,
            ToolStatus.UNCERTAIN,
            None,
            f"intent found with no result; {answer.detail}",
            ledger_status="uncertain",
        )

    def _in_flight(self, c: _Call) -> ToolResult:
        """Another call holds this key right now: a conflict, never a second call."""
        reason = f"another call holds key {c.key} in flight; ask again after its claim runs out"
        event_id = self.store.record_event(
            saga_id=c.caller.saga_id,
            actor=c.caller.actor,
            kind="tool_call",
            status=ToolStatus.REJECTED.value,
            tool=c.spec.name,
            detail={"call_id": c.proposal.call_id, "reason": reason, "key": c.key, "in_flight": True},
            times=c.times,
        )
        return ToolResult(
            tool=c.spec.name,
            status=ToolStatus.REJECTED,
            output={"in_flight": True, "retry_after": self._claim_seconds},
            refusal=Refusal.IN_FLIGHT,
            retry_after=self._claim_seconds,
            reason=reason,
            idempotency_key=c.key,
            event_id=event_id,
            call_id=c.proposal.call_id,
        )

    def _run_read_only(self, c: _Call) -> ToolResult:
        with spans.phase(names.SEND, c.attrs, kind=SpanKind.CLIENT):
            c.times.sent_at = self._clock()
            try:
                output = self._invoke(c)
            except Refused as exc:  # the read was not allowed, and did not happen
                return self._finish(c, ToolStatus.REJECTED, None, str(exc), ledger_status=None, phase=True)
            except Exception as exc:  # a read failed: definitely nothing applied
                reason = str(exc) if isinstance(exc, PressroomError) else f"{type(exc).__name__}: {exc}"
                return self._finish(c, ToolStatus.ERROR, None, reason, ledger_status=None, phase=True)
        return self._finish(c, ToolStatus.OK, output, None, ledger_status=None, phase=True)

    def _execute(self, c: _Call, intent_id: str) -> ToolResult:
        try:
            with spans.phase(names.SEND, c.attrs, kind=SpanKind.PRODUCER):
                c.times.sent_at = self._clock()
                output = self._invoke(c)
        except DestinationError as exc:
            if exc.definite:
                return self._finish(c, ToolStatus.ERROR, None, str(exc), "failed", intent_id)
            return self._after_maybe(c, intent_id, str(exc))
        except Refused as exc:
            return self._finish(c, ToolStatus.REJECTED, None, str(exc), "failed", intent_id)
        except PressroomError as exc:
            return self._finish(c, ToolStatus.ERROR, None, str(exc), "failed", intent_id)
        except Exception as exc:  # an executor bug after the intent: the effect may exist
            if c.spec.risk is Risk.HIGH_RISK:
                return self._after_maybe(c, intent_id, f"{type(exc).__name__}: {exc}")
            return self._finish(
                c, ToolStatus.ERROR, None, f"{type(exc).__name__}: {exc}", "failed", intent_id
            )
        return self._finish(c, ToolStatus.OK, output, None, "done", intent_id)

    def _after_maybe(self, c: _Call, intent_id: str, why: str) -> ToolResult:
        answer = self._probe(c)
        if answer.kind == "applied":
            return self._finish(c, ToolStatus.OK, answer.receipt, None, "done", intent_id)
        if answer.kind == "absent":
            return self._finish(c, ToolStatus.ERROR, None, f"{why}; status: not applied", "failed", intent_id)
        return self._finish(c, ToolStatus.UNCERTAIN, None, f"{why}; {answer.detail}", "uncertain", intent_id)

    def _probe(self, c: _Call) -> ProbeAnswer:
        probe = c.spec.status_probe
        if probe is None or probe is NO_PROBE or not callable(probe) or c.key is None:
            return ProbeAnswer(kind="unknown", detail="the tool has no status query")
        try:
            return probe(self._context(c), c.key)
        except Exception as exc:
            return ProbeAnswer(kind="unknown", detail=f"status query failed: {exc}")

    def _invoke(self, c: _Call) -> Any:
        assert c.spec.executor is not None  # the registry guarantees it
        output = c.spec.executor(self._context(c), c.model)
        if isinstance(output, BaseModel):
            return output.model_dump(mode="json")
        return output

    def _context(self, c: _Call) -> ToolContext:
        return ToolContext(
            saga_id=c.caller.saga_id,
            actor=c.caller.actor,
            idempotency_key=c.key,
            call_id=c.proposal.call_id,
            arguments=c.model,
        )

    def _finish(
        self,
        c: _Call,
        status: ToolStatus,
        output: Any,
        reason: str | None,
        ledger_status: str | None,
        parent: str | None = None,
        phase: bool = False,
    ) -> ToolResult:
        with spans.phase(names.ACK, c.attrs):
            c.times.acked_at = self._clock()
            result = ToolResult(
                tool=c.spec.name,
                status=status,
                output=output,
                reason=reason,
                idempotency_key=c.key,
                call_id=c.proposal.call_id,
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
                recorder, ctx, model = c.spec.recorder, self._context(c), c.model

                def hook(session: Any) -> None:
                    recorder(session, ctx, model, result)

            if c.key and ledger_status is not None:
                stored = (
                    output
                    if isinstance(output, dict)
                    else ({"value": output} if output is not None else None)
                )
                event_id = self.store.finish_effect(
                    key=c.key, ledger_status=ledger_status, result=stored, event=event, hook=hook
                )
            else:
                applied = status in (ToolStatus.OK, ToolStatus.REPLAYED)
                event_id = self.store.record_event(**event, hook=hook if applied else None)
        if status in (ToolStatus.ERROR, ToolStatus.UNCERTAIN):
            spans.mark_error(reason or status.value)
        return result.model_copy(update={"event_id": event_id})

    def _refuse(self, proposal: ToolCall, caller: Caller, times: EventTimes, reason: str) -> ToolResult:
        times.authorized_at = times.authorized_at or self._clock()
        event_id = self.store.record_event(
            saga_id=caller.saga_id,
            actor=caller.actor,
            kind="tool_call",
            status=ToolStatus.REJECTED.value,
            tool=proposal.tool,
            detail={"call_id": proposal.call_id, "reason": reason},
            times=times,
        )
        return ToolResult(
            tool=proposal.tool,
            status=ToolStatus.REJECTED,
            reason=reason,
            event_id=event_id,
            call_id=proposal.call_id,
        )

    def _await_approval(self, c: _Call, decision: AwaitApproval) -> ToolResult:
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
            detail={"call_id": c.proposal.call_id, "reason": decision.reason, "key": c.key},
            times=c.times,
        )
        return ToolResult(
            tool=c.spec.name,
            status=ToolStatus.APPROVAL_REQUIRED,
            output=output,
            reason=decision.reason,
            idempotency_key=c.key,
            event_id=event_id,
            call_id=c.proposal.call_id,
        )


def _detail(c: _Call, reason: str | None, output: Any) -> dict[str, Any]:
    detail: dict[str, Any] = {"call_id": c.proposal.call_id, "args_digest": c.digest}
    if c.key:
        detail["key"] = c.key
    if reason:
        detail["reason"] = reason
    if isinstance(output, dict) and c.spec.risk is Risk.HIGH_RISK:
        detail["receipt"] = output
    return detail


def _summarise(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{loc}: {err['msg']}")
    return "invalid arguments: " + "; ".join(parts)


def sleep_backoff(attempt: int, base: float = 0.1, cap: float = 5.0) -> float:
    """Exponential backoff for definite errors: base·2^(attempt-1), capped."""
    return float(min(cap, base * (2 ** max(0, attempt - 1))))


__all__ = ["Caller", "Harness", "sleep_backoff"]
