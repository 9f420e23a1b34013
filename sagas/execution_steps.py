"""The saga runner's step helpers, each on a session or the tool path it is given.

`start_execution` creates a saga's step rows (once) and starts its execution;
`rearm` makes a step publishable again under its key; `approval_refusal` says
why an approval can no longer start an execution; `call_tool` sends one
publishing tool call; `step_views` is what the decider reads of the step rows
(with each destination's reversibility, from the registry).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from sqlmodel import Session

from orchestrator.harness.approvals import ApprovalRequest, ApprovalView, refusal, session_for
from orchestrator.harness.capabilities import ROLE_CAPABILITIES
from orchestrator.harness.digests import business_key
from orchestrator.harness.handles import Grant, Task
from orchestrator.harness.ports import Ledger
from orchestrator.harness.spec import ToolCall, ToolResult
from orchestrator.store.db import UnitOfWork
from orchestrator.store.tables import SagaRow, StepRow
from orchestrator.toolpath.engine import Caller
from orchestrator.toolpath.tool_path import ToolPath
from sagas import decider, records
from sagas.destinations.registry import is_reversible
from sagas.machine import SagaEvent, SagaState
from sagas.step_records import set_step
from sagas.step_states import StepState

PUBLISHER = "publisher"


def publisher_grant(destinations: Iterable[str]) -> Grant:
    """The handle a publisher's handoff carries: the publisher's table, the saga's destinations,
    and one publish and one undo per destination (a replay of the same call is not a use)."""
    dests = frozenset(destinations)
    table = ROLE_CAPABILITIES[PUBLISHER]
    counts = {"publish": len(dests), "publish.compensate": len(dests)}
    return Grant(PUBLISHER, table, Task(actions=table, destinations=dests, counts=counts))


def start_execution(
    session: Session, saga: SagaRow, digest: str, steps: list[StepRow] | None = None
) -> list[StepRow]:
    """Create the step rows (once) and move `approved → executing`; the saga's steps in
    position order. `steps`: the saga's step rows as this transaction read them, when it has."""
    existing = {s.uri: s for s in (records.steps(session, saga.id) if steps is None else steps)}
    for position, uri in enumerate(saga.destinations):
        step = existing.get(uri)
        key = business_key(saga.id, uri, digest)
        if step is None:
            step = existing[uri] = StepRow(saga_id=saga.id, uri=uri, position=position)
        if step.idempotency_key != key:
            step.receipt, step.idempotency_key, step.version_digest = None, key, digest
            set_step(session, step, StepState.PENDING, actor=PUBLISHER)
        session.add(step)
    if saga.state == SagaState.APPROVED:
        records.transition(session, saga, SagaEvent.EXECUTION_STARTED, actor=PUBLISHER)
    return sorted(existing.values(), key=lambda step: step.position)


def rearm(uow: UnitOfWork, store: Ledger, step: StepRow, *, actor: str, reason: str) -> None:
    """Make a step publishable again under its key: its publish and its undo may both run again."""
    key = step.idempotency_key
    if key:
        for ledger_key in (key, "undo-" + key):
            found = store.ledger_get(ledger_key)
            if found is not None and found.status != "absent":
                store.reconcile(ledger_key, "absent", actor=actor, reason=reason, within=uow)
    step.receipt = None
    set_step(uow.session, step, StepState.PENDING, actor=actor)


def approval_refusal(
    approval: ApprovalView | None, saga: SagaRow, digest: str, key: bytes, now: datetime
) -> str | None:
    """Why the saga's approval can no longer start an execution, if it cannot."""
    session = session_for(saga.id, saga.run)
    want = ApprovalRequest(
        saga_id=saga.id,
        version_digest=digest,
        destination=saga.destinations[0],
        session=session,
        execution=session,
    )
    return refusal(approval, want, key=key, now=now)


def call_tool(tools: ToolPath, caller: Caller, tool: str, saga_id: str, uri: str, digest: str) -> ToolResult:
    return tools.call(
        ToolCall(
            tool=tool,
            arguments={"saga_id": saga_id, "destination": uri, "version_digest": digest},
            call_id=uuid.uuid4().hex,
        ),
        caller,
    )


def step_views(steps: list[StepRow]) -> tuple[decider.Step, ...]:
    return tuple(
        decider.Step(
            uri=s.uri,
            position=s.position,
            state=StepState(s.state),
            since=s.updated_at,
            reversible=is_reversible(s.uri),
        )
        for s in steps
    )


__all__ = [
    "PUBLISHER",
    "approval_refusal",
    "publisher_grant",
    "call_tool",
    "rearm",
    "start_execution",
    "step_views",
]
