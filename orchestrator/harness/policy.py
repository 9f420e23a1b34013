"""The policy: a pure function from (state, proposal) to a decision value.

`decide()` returns `Reject | AwaitApproval | Executable`, frozen models
tagged by `kind`, so the same value crosses Celery, HTTP and MCP unchanged.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.harness.approvals import ApprovalProblem, ApprovalRequest, ApprovalView, problem
from orchestrator.harness.capabilities import Capabilities
from orchestrator.harness.spec import Refusal, Risk


class Action(BaseModel):
    model_config = ConfigDict(frozen=True)

    tool: str
    risk: Risk
    arguments: dict[str, Any]
    args_digest: str
    idempotency_key: str | None = None


class Reject(BaseModel):
    model_config = ConfigDict(frozen=True)
    kind: Literal["reject"] = "reject"
    reason: str
    refusal: Refusal = Refusal.POLICY


class AwaitApproval(BaseModel):
    model_config = ConfigDict(frozen=True)
    kind: Literal["await_approval"] = "await_approval"
    action: Action
    reason: str
    request: ApprovalRequest | None = None
    # APPROVAL_MISSING: none yet; APPROVAL_STALE: one exists, for another version.
    refusal: Refusal = Refusal.APPROVAL_MISSING


class Executable(BaseModel):
    model_config = ConfigDict(frozen=True)
    kind: Literal["executable"] = "executable"
    action: Action
    approval_id: str | None = None


Decision = Annotated[Reject | AwaitApproval | Executable, Field(discriminator="kind")]


class PolicyState(BaseModel):
    """Everything the policy may look at; gathered by the engine beforehand."""

    model_config = ConfigDict(frozen=True)

    capabilities: Capabilities
    needed_capability: str
    approval_request: ApprovalRequest | None = None
    approval: ApprovalView | None = None
    replay: bool = False
    now: datetime


def decide(state: PolicyState, action: Action, *, key: bytes) -> Reject | AwaitApproval | Executable:
    if action.risk is Risk.DENY:
        return Reject(reason=f"tool {action.tool} is denied by policy")
    if state.needed_capability not in state.capabilities:
        return Reject(reason=f"caller lacks capability {state.needed_capability!r} for {action.tool}")
    if action.risk is not Risk.HIGH_RISK or state.replay:
        # A completed key is answered from the record: no side effect, no approval.
        return Executable(action=action)
    want = state.approval_request
    if want is None:
        return Reject(reason=f"high-risk tool {action.tool} has no approval binding")
    fault = problem(state.approval, want, key=key, now=state.now)
    if fault is None and state.approval is not None:
        return Executable(action=action, approval_id=state.approval.approval_id)
    if fault is None or fault.problem is ApprovalProblem.MISSING:
        return AwaitApproval(action=action, reason=fault.text if fault else "approval required", request=want)
    if fault.problem is ApprovalProblem.OTHER_VERSION:
        return AwaitApproval(action=action, reason=fault.text, request=want, refusal=Refusal.APPROVAL_STALE)
    return Reject(reason=fault.text, refusal=Refusal.APPROVAL_STALE)


__all__ = ["Action", "AwaitApproval", "Decision", "Executable", "PolicyState", "Reject", "decide"]
