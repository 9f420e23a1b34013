"""What only a person may do to an `effect-unknown` saga: reconcile or cancel.

`reconcile confirmed` records the outcome (a receipt from the destination's
status when it has one, else the person's word) and goes on without calling
the destination again; `reconcile absent` lets the step run again with the
same key. `cancel` compensates what was (or may have been) published, in
reverse order. Each writes an event naming the person and the reason.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from sqlmodel import Session

from orchestrator.app import App
from orchestrator.errors import InvalidInput, Refused
from orchestrator.harness.capabilities import ROLE_CAPABILITIES
from orchestrator.harness.engine import Caller
from orchestrator.harness.spec import ToolCall, ToolStatus
from orchestrator.routing import PUBLISH
from orchestrator.store.db import unit_of_work
from orchestrator.store.work import abandon_open_work
from sagas import records
from sagas.machine import SagaEvent, SagaState, apply
from sagas.runner import compensate
from sagas.step_records import set_step
from sagas.step_states import StepState


def reconcile_step(
    app: App, saga_id: str, *, destination: str, outcome: str, actor: str, reason: str
) -> None:
    with Session(app.engine) as s:
        saga = records.load_saga(s, saga_id)
        apply(saga.state, SagaEvent.RECONCILED)
        step = next((st for st in records.steps(s, saga_id) if st.uri == destination), None)
        if step is None:
            raise InvalidInput(f"{destination} is not a destination of saga {saga_id}")
        if step.state != StepState.UNCERTAIN:
            raise Refused(f"step {destination} is {step.state}, not uncertain")
        key, digest = step.idempotency_key, step.version_digest
    receipt: dict[str, Any] = {"reconciled_by": actor, "reason": reason}
    if outcome == "confirmed" and key and digest:
        # Ask the destination for its receipt through the harness (read only);
        # whatever it says, the person's word stands and nothing is published.
        answer = app.harness.call(
            ToolCall(
                tool="publish.status",
                arguments={"saga_id": saga_id, "destination": destination, "version_digest": digest},
                call_id=uuid.uuid4().hex,
            ),
            Caller(actor=actor, capabilities=frozenset({"publish.status"}), saga_id=saga_id),
        )
        found = answer.output if answer.status is ToolStatus.OK and isinstance(answer.output, dict) else {}
        if found.get("kind") == "applied" and isinstance(found.get("receipt"), dict):
            receipt = {**found["receipt"], "reconciled_by": actor}
    with unit_of_work(app.engine) as uow:
        s = uow.session
        saga = records.load_saga(s, saga_id, lock=True)
        step = next(st for st in records.steps(s, saga_id) if st.uri == destination)
        if step.state != StepState.UNCERTAIN:
            raise Refused(f"step {destination} is {step.state}, not uncertain")
        if not key:
            raise Refused(f"step {destination} has no idempotency key to reconcile")
        # The ledger is the store's: its row and the `reconcile` event join this transaction.
        detail = {"destination": destination}
        settled: Literal["confirmed", "absent"] = "confirmed" if outcome == "confirmed" else "absent"
        app.store.reconcile(key, settled, receipt, actor=actor, reason=reason, detail=detail, within=uow)
        confirmed = outcome == "confirmed"
        step.receipt = receipt if confirmed else None
        set_step(s, step, StepState.DONE if confirmed else StepState.PENDING, actor=actor)
        records.transition(
            s, saga, SagaEvent.RECONCILED, actor=actor, reason=f"reconciled {outcome}: {reason}"
        )
        head = records.head(s, saga)
        app.dispatch(
            uow,
            saga_id=saga_id,
            task=PUBLISH,
            version=saga.head_version,
            version_digest=head.digest if head else None,
            capabilities=tuple(sorted(ROLE_CAPABILITIES["publisher"])),
        )


def cancel_saga(app: App, saga_id: str, *, actor: str) -> None:
    with Session(app.engine) as s:
        saga = records.load_saga(s, saga_id)
        apply(saga.state, SagaEvent.CANCELLED)
        state = saga.state
        head = records.head(s, saga)
        to_undo = [
            st.uri for st in records.steps(s, saga_id) if st.state in (StepState.DONE, StepState.UNCERTAIN)
        ]
    left: list[str] = []
    if state == SagaState.EFFECT_UNKNOWN and head is not None:
        caller = Caller(actor=actor, capabilities=ROLE_CAPABILITIES["publisher"], saga_id=saga_id)
        left = compensate(app, caller, saga_id, list(reversed(to_undo)), head.digest)
    if left:
        raise Refused(f"could not compensate {', '.join(left)}; the saga stays effect-unknown", left=left)
    with unit_of_work(app.engine) as uow:
        saga = records.load_saga(uow.session, saga_id, lock=True)
        records.transition(
            uow.session, saga, SagaEvent.CANCELLED, actor=actor, reason=f"cancelled by {actor}"
        )
        records.void_approvals(uow.session, saga_id, reason="cancelled")
        abandon_open_work(uow.session, saga_id)


__all__ = ["cancel_saga", "reconcile_step"]
