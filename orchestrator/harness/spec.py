"""Tool specifications and results: what every tool call is made of.

A `ToolSpec` is a name, a description, a pydantic input model (its JSON Schema
is what planners and MCP clients see), a risk class and an executor. The risk
class carries a contract that `registry.register` checks:

* ``reversible_write`` declares how its business key is derived;
* ``high_risk`` declares its key, its status probe (or `NO_PROBE`: a timeout
  then means `uncertain`) and its compensation: the name of the registered
  write tool that undoes it, called through the harness like any tool (or
  `IRREVERSIBLE`); the harness refuses to start when that tool is missing;
* ``deny`` stays registered and is always refused.

No I/O here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field


class Risk(StrEnum):
    READ_ONLY = "read_only"
    REVERSIBLE_WRITE = "reversible_write"
    HIGH_RISK = "high_risk"
    DENY = "deny"


class ToolStatus(StrEnum):
    OK = "ok"
    REPLAYED = "replayed"
    REJECTED = "rejected"
    APPROVAL_REQUIRED = "approval_required"
    ERROR = "error"
    UNCERTAIN = "uncertain"


class Refusal(StrEnum):
    """Why a call was refused (or told to wait): the typed half of `ToolResult.reason`.

    Callers branch on this, never on the reason's text.
    """

    SCHEMA = "schema"  # unknown tool, unparseable or invalid arguments
    PERMISSION = "permission"  # the person's role lacks the tool
    POLICY = "policy"  # denied tool, missing capability, no approval binding
    CONFLICT = "conflict"  # the business key was used with other arguments
    APPROVAL_MISSING = "approval_missing"  # no approval for this version yet
    APPROVAL_STALE = "approval_stale"  # the approval is for another version, expired, used or voided
    APPROVER_LAPSED = "approver_lapsed"  # the approver is no longer an active reviewer
    IN_FLIGHT = "in_flight"  # another call holds the key right now
    BOUND = "bound"  # a pre-execute check refused (digest, allowed roots, saga state)
    BUDGET_EXHAUSTED = "budget_exhausted"  # the saga's durable tool-call budget is spent
    EXECUTOR = "executor"  # the executor itself refused (nothing happened)


class _Declared:
    """A named sentinel: the tool author said so explicitly."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NO_PROBE: Final = _Declared("NO_PROBE")
IRREVERSIBLE: Final = _Declared("IRREVERSIBLE")


class ProbeAnswer(BaseModel):
    """What a status probe says about a business key."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["applied", "absent", "unknown"]
    receipt: dict[str, Any] | None = None
    detail: str = ""


@dataclass(frozen=True)
class ToolContext:
    """What an executor may know about the call it serves (never a capability)."""

    saga_id: str | None
    actor: str
    idempotency_key: str | None
    call_id: str
    arguments: Any = None  # the validated input model of this call


Executor = Callable[[ToolContext, Any], Any]
KeyFn = Callable[[Any], str]
Probe = Callable[[ToolContext, str], ProbeAnswer]
# The registered tool that undoes a high-risk one (its name), or IRREVERSIBLE.
Compensation = str
# (saga_id, version_digest, destination) an approval must cover, from the arguments.
ApprovalScope = Callable[[Any], tuple[str, str, str]]
# Runs inside the transaction that records the result (the "ack" commit).
Recorder = Callable[[Any, ToolContext, Any, "ToolResult"], None]
# Runs inside the pre-execute transaction (the "intent" commit), before the
# approval is consumed; raising a `PressroomError` refuses the call and rolls
# the intent back, so nothing is recorded as pending and nothing is sent.
PreExecute = Callable[[Any, ToolContext, Any], None]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_model: type[BaseModel]
    risk: Risk
    executor: Executor | None
    output_model: type[BaseModel] | None = None
    key: KeyFn | None = None
    status_probe: Probe | _Declared | None = None
    compensation: Compensation | _Declared | None = None  # a tool name: no executor here
    capability: str = ""
    approval_scope: ApprovalScope | None = None
    recorder: Recorder | None = None
    pre_execute: tuple[PreExecute, ...] = ()
    annotations: dict[str, Any] = field(default_factory=dict)

    @property
    def needed_capability(self) -> str:
        """The capability a caller must hold; the tool's own name unless stated."""
        return self.capability or self.name

    def input_schema(self) -> dict[str, Any]:
        return self.input_model.model_json_schema()

    def output_schema(self) -> dict[str, Any] | None:
        return self.output_model.model_json_schema() if self.output_model else None


@dataclass(frozen=True)
class ToolInfo:
    """A tool as listings show it (MCP `tools/list`, a planner's menu): no executor, no probe."""

    name: str
    description: str
    risk: Risk
    needed_capability: str
    input_schema: dict[str, Any]
    output_model: type[BaseModel] | None = None
    annotations: dict[str, Any] = field(default_factory=dict)
    compensation: str | None = None  # the tool that undoes this one, when there is one

    @classmethod
    def of(cls, spec: ToolSpec) -> ToolInfo:
        return cls(
            name=spec.name,
            description=spec.description,
            risk=spec.risk,
            needed_capability=spec.needed_capability,
            input_schema=spec.input_schema(),
            output_model=spec.output_model,
            annotations=dict(spec.annotations),
            compensation=spec.compensation if isinstance(spec.compensation, str) else None,
        )


class ToolCall(BaseModel):
    """A planner's proposal: raw, unvalidated arguments."""

    model_config = ConfigDict(frozen=True)

    tool: str
    arguments: str | dict[str, Any] = Field(description="JSON text or an already-decoded object")
    call_id: str


class ToolResult(BaseModel):
    """The one answer every path gets, whatever the tool."""

    model_config = ConfigDict(frozen=True)

    tool: str
    status: ToolStatus
    output: Any = None
    reason: str | None = None
    idempotency_key: str | None = None
    event_id: str | None = None
    call_id: str | None = None
    # Set on every refused, waiting or in-flight answer; None when the call ran.
    refusal: Refusal | None = None
    # An in-flight answer: seconds after which asking again may find the key free.
    retry_after: float | None = None

    @property
    def applied(self) -> bool:
        return self.status in (ToolStatus.OK, ToolStatus.REPLAYED)


__all__ = [
    "IRREVERSIBLE",
    "ApprovalScope",
    "Recorder",
    "NO_PROBE",
    "Compensation",
    "PreExecute",
    "Executor",
    "KeyFn",
    "Probe",
    "ProbeAnswer",
    "Refusal",
    "Risk",
    "ToolCall",
    "ToolContext",
    "ToolInfo",
    "ToolResult",
    "ToolSpec",
    "ToolStatus",
]
