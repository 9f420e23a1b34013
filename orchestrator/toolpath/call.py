"""What travels down the wrapped tool path: the caller, the call, its phases.

`Call` is the validated proposal plus what the wrappers above learnt about it
(the ledger row, the approval). `Step` is one wrapper's shape: a call in, the
one answer out. `Phases` keeps the four phase spans siblings under the
action's span although different wrappers open them. No I/O here beyond spans.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from opentelemetry.trace import SpanKind
from pydantic import BaseModel

from orchestrator.harness.approvals import ApprovalRequest
from orchestrator.harness.capabilities import Capabilities
from orchestrator.harness.handles import Handle, HandleUse
from orchestrator.harness.ports import EventTimes, HeldTx, LedgerView
from orchestrator.harness.principals import Principal
from orchestrator.harness.spec import ToolCall, ToolContext, ToolResult, ToolSpec
from telemetry import spans


@dataclass(frozen=True)
class Usage:
    """Model usage spent to propose one call, charged to the saga's budget with it."""

    tokens: int = 0
    cost: float = 0.0


@dataclass(frozen=True)
class Caller:
    """Who is calling and what they may do. Never widened by tool output."""

    actor: str
    capabilities: Capabilities
    saga_id: str | None = None
    span_attributes: dict[str, Any] = field(default_factory=dict)
    # The person behind the call (MCP); None: the saga's own agent, bound by its capabilities.
    principal: Principal | None = None
    # What the planner spent on this proposal (a model planner); charged with the call.
    usage: Usage = field(default_factory=Usage)
    # The request that runs this call: a role turn's delivery (its message id), an MCP request.
    request_id: str | None = None
    # The verified capability handle the call acts under (a handoff's); None: a person's
    # command or an entry point without one, bound by `capabilities` and the principal only.
    handle: Handle | None = None
    # Why the handoff's handle was refused: every call of this caller is refused with it.
    handle_refusal: str | None = None

    @property
    def budgeted(self) -> bool:
        """A saga's agent spends the saga's budget; a person's command does not."""
        return self.saga_id is not None and self.principal is None


class Phases(AbstractContextManager["Phases"]):
    """The action's phase spans, one open at a time, each a sibling of the last.

    Entering a phase closes the open one first, so whichever wrapper starts
    `send` ends `authorization`; leaving the action closes the last.
    """

    def __init__(self, attrs: dict[str, Any]) -> None:
        self.attrs = attrs
        self._open: ExitStack | None = None

    def enter(self, name: str, kind: SpanKind | None = None) -> None:
        self.close()
        spans.annotate(self.attrs)  # the action learns what the last phase learnt (risk, key)
        stack = ExitStack()
        stack.enter_context(spans.phase(name, self.attrs, kind=kind))
        self._open = stack

    def close(self) -> None:
        stack, self._open = self._open, None
        if stack is not None:
            stack.close()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stack, self._open = self._open, None
        if stack is not None:
            stack.__exit__(kind, exc, tb)


@dataclass
class Call:
    """One validated call on its way down the path."""

    spec: ToolSpec
    proposal: ToolCall
    caller: Caller
    args: dict[str, Any]
    model: BaseModel
    digest: str
    key: str | None
    times: EventTimes
    phases: Phases
    # Learnt by `Authorize`: the key's ledger row, and the approval a high-risk call consumes.
    ledger: LedgerView | None = None
    approval_id: str | None = None
    request: ApprovalRequest | None = None
    # Learnt by `Authorize`: the handle use a counted call spends (a write's in its intent).
    use: HandleUse | None = None
    # The store's open transaction from the authorization reads (SQL: one pinned
    # connection for the whole call), for the intent or the refusal to commit in.
    tx: HeldTx | None = None

    @property
    def attrs(self) -> dict[str, Any]:
        return self.phases.attrs

    def context(self) -> ToolContext:
        return ToolContext(
            saga_id=self.caller.saga_id,
            actor=self.caller.actor,
            idempotency_key=self.key,
            call_id=self.proposal.call_id,
            arguments=self.model,
        )


class Step(Protocol):
    """One wrapper of the path: a call in, the one answer out."""

    def __call__(self, call: Call, /) -> ToolResult: ...


__all__ = ["Call", "Caller", "Phases", "Step", "Usage"]
