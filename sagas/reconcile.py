"""What only a person may do to a saga the machines stopped on (reconcile, cancel),
or to one they finished (takedown).

`reconcile` settles one unsettled step. For a publish that may have happened
(`uncertain`): `confirmed` records the outcome (a receipt from the
destination's status when it has one, else the person's word) without
calling the destination again; `absent` lets the step run again with the same
key. For an undo that failed (`compensation-failed`): `confirmed` means the
effect stays (the step is `kept`), `absent` means it is gone (`compensated`).
Either way the saga goes back to `executing` and its runner carries on.

`cancel` before execution ends the saga at once; while executing it asks the
runner to stop before its next step and undo what it published; from
`effect-unknown` it undoes what was (or may have been) published, the last
completed first, then cancels. Each writes an event naming the person.

`takedown` undoes one destination's publish of a `succeeded` saga, with a
reason, through the same `publish.compensate` tool call a compensation makes
(its `undo-` key, ledger row, spans, and the destination's own undo). The
step becomes `compensated`; the saga stays `succeeded` (the machine has no
way out of it), even when every page is down: `status` shows each step. An
undo that fails or may have happened leaves the step `compensation-failed`
with the reason and the saga `succeeded` (the machine has no
`succeeded → effect-unknown`); `takedown` again runs the undo again under its
key. Events name the person and the reason before and after the undo.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from sqlmodel import Session

from orchestrator.core.errors import InvalidInput, Refused
from orchestrator.core.routing import PUBLISH
from orchestrator.harness.capabilities import ROLE_CAPABILITIES
from orchestrator.harness.spec import ToolCall, ToolStatus
from orchestrator.store.events import add_event
from orchestrator.store.tables import SagaRow, StepRow
from orchestrator.store.work import abandon_open_work
from orchestrator.toolpath.engine import Caller
from outbox.handlers import Dispatch
from sagas import decider, records
from sagas.effect_checks import TAKEDOWN_REQUESTED
from sagas.execution_steps import publisher_grant, step_views
from sagas.machine import SagaEvent, SagaState, apply
from sagas.runner import SagaRunner, publisher_caller
from sagas.step_records import set_step
from sagas.step_states import StepState

Settled = Literal["confirmed", "absent"]


def reconcile_step(
    runner: SagaRunner,
    dispatch: Dispatch,
    saga_id: str,
    *,
    destination: str,
    outcome: str,
    actor: str,
    reason: str,
) -> None:
    with runner.transact() as uow:
        saga = records.load_saga(uow.session, saga_id)
        apply(saga.state, SagaEvent.RECONCILED)
        step = _unsettled(uow.session, saga_id, destination)
        key, digest, undo = (
            step.idempotency_key,
            step.version_digest,
            step.state == StepState.COMPENSATION_FAILED,
        )
        uow.session.rollback()
    receipt: dict[str, Any] = {"reconciled_by": actor, "reason": reason}
    if outcome == "confirmed" and not undo and key and digest:
        receipt = _asked_receipt(runner, saga_id, destination, digest, actor) or receipt
    settled: Settled = "confirmed" if outcome == "confirmed" else "absent"
    with runner.transact() as uow:
        s = uow.session
        saga = records.load_saga(s, saga_id, lock=True)
        step = _unsettled(s, saga_id, destination)
        if not key:
            raise Refused(f"step {destination} has no idempotency key to reconcile")
        detail = {"destination": destination}
        if undo:
            # The undo's own record: confirmed that the effect stays means the undo did not happen.
            undo_key = "undo-" + key
            undone: Settled = "absent" if settled == "confirmed" else "confirmed"
            if runner.store.ledger_get(undo_key) is not None:
                runner.store.reconcile(
                    undo_key, undone, actor=actor, reason=reason, detail=detail, within=uow
                )
            set_step(
                s, step, StepState.KEPT if settled == "confirmed" else StepState.COMPENSATED, actor=actor
            )
        else:
            # The ledger is the store's: its row and the `reconcile` event join this transaction.
            runner.store.reconcile(
                key, settled, receipt, actor=actor, reason=reason, detail=detail, within=uow
            )
            step.receipt = receipt if settled == "confirmed" else None
            set_step(s, step, StepState.DONE if settled == "confirmed" else StepState.PENDING, actor=actor)
        records.transition(
            s, saga, SagaEvent.RECONCILED, actor=actor, reason=f"reconciled {outcome}: {reason}"
        )
        resume(dispatch, uow, saga)


def cancel_saga(runner: SagaRunner, saga_id: str, *, actor: str) -> str:
    """Cancel, or ask the runner to: `cancelled` or `requested`."""
    with runner.transact() as uow:
        saga = records.load_saga(uow.session, saga_id, lock=True)
        apply(saga.state, SagaEvent.CANCELLED)
        if saga.state == SagaState.EXECUTING:
            if saga.cancel_requested_by is None:
                saga.cancel_requested_by = actor
                uow.session.add(saga)
                add_event(
                    uow.session,
                    saga_id=saga.id,
                    actor=actor,
                    kind="saga",
                    status="cancel_requested",
                    detail={"reason": f"cancel requested by {actor}: stop before the next step and undo"},
                )
            return "requested"
        if saga.state != SagaState.EFFECT_UNKNOWN:
            _cancelled(uow.session, saga, actor)
            return "cancelled"
        head = records.head(uow.session, saga)
        steps = decider.undo_order(step_views(records.steps(uow.session, saga_id)), also=decider.UNSETTLED)
    if head is not None:
        _undo_all(runner, saga, head.digest, steps, actor)
    with runner.transact() as uow:
        saga = records.load_saga(uow.session, saga_id, lock=True)
        _cancelled(uow.session, saga, actor)
    return "cancelled"


# A takedown needs a published page (`done`), or one whose takedown failed (asked for again).
TAKEN_DOWN_FROM = frozenset({StepState.DONE, StepState.COMPENSATION_FAILED})


def takedown(runner: SagaRunner, saga_id: str, *, destination: str, actor: str, reason: str) -> str:
    """Take one destination's page of a succeeded saga down: the step ends `compensated`
    (returned), or `Refused` names why not (the step `compensation-failed` when the undo
    failed or may have happened)."""
    with runner.transact() as uow:
        s = uow.session
        saga = records.load_saga(s, saga_id, lock=True)
        if saga.state != SagaState.SUCCEEDED:
            raise Refused(
                f"cannot take down a page of a saga that is {saga.state}; only a succeeded saga's pages "
                "are taken down (cancel undoes an unfinished saga)",
                saga_id=saga.id,
            )
        step = _step_of(s, saga.id, destination)
        if step.state == StepState.COMPENSATED:
            raise Refused(f"{destination} is already taken down (step compensated)", saga_id=saga.id)
        if (
            StepState(step.state) not in TAKEN_DOWN_FROM
            or not step.idempotency_key
            or not step.version_digest
        ):
            raise Refused(
                f"step {destination} is {step.state}: there is no page to take down", saga_id=saga.id
            )
        key, digest = step.idempotency_key, step.version_digest
        if step.state == StepState.COMPENSATION_FAILED and runner.store.ledger_get("undo-" + key) is not None:
            # The person asks for the undo again: it is idempotent by key, so it may run once more.
            runner.store.reconcile(
                "undo-" + key, "absent", actor=actor, reason=f"takedown again: {reason}", within=uow
            )
        _takedown_event(s, saga.id, actor, TAKEDOWN_REQUESTED, destination, key, reason)
    result = runner.undo(publisher_caller(saga, digest, actor=actor), saga.id, destination, digest)
    with runner.transact() as uow:
        s = uow.session
        step = _step_of(s, saga.id, destination)
        if result.applied:
            if step.state != StepState.COMPENSATED:  # a replayed undo: its recorder ran the first time
                set_step(s, step, StepState.COMPENSATED, actor=actor, reason=reason)
            _takedown_event(s, saga.id, actor, "taken_down", destination, key, reason)
            return StepState.COMPENSATED.value
        why = result.reason or result.status.value
        if result.status in (ToolStatus.ERROR, ToolStatus.UNCERTAIN):
            set_step(
                s, step, StepState.COMPENSATION_FAILED, actor=actor, reason=f"takedown by {actor}: {why}"
            )
            _takedown_event(s, saga.id, actor, "takedown_failed", destination, key, reason, why=why)
    if result.status in (ToolStatus.ERROR, ToolStatus.UNCERTAIN):
        raise Refused(
            f"could not take down {destination}: {why}; the step is compensation-failed and the saga "
            "stays succeeded (run takedown again)",
            saga_id=saga.id,
            left=[destination],
        )
    raise Refused(f"could not take down {destination}: {why}", saga_id=saga.id)


def _step_of(session: Session, saga_id: str, destination: str) -> StepRow:
    step = next((st for st in records.steps(session, saga_id) if st.uri == destination), None)
    if step is None:
        raise InvalidInput(f"{destination} is not a destination of saga {saga_id}")
    return step


def _takedown_event(
    session: Session,
    saga_id: str,
    actor: str,
    status: str,
    destination: str,
    key: str,
    reason: str,
    *,
    why: str | None = None,
) -> None:
    detail = {"destination": destination, "key": key, "reason": f"takedown by {actor}: {reason}"}
    if why:
        detail["failure"] = why
    add_event(session, saga_id=saga_id, actor=actor, kind="saga", status=status, detail=detail)


def resume(dispatch: Dispatch, uow: Any, saga: SagaRow) -> None:
    """Queue the saga's runner again, for the head version."""
    head = records.head(uow.session, saga)
    dispatch(
        uow,
        saga_id=saga.id,
        task=PUBLISH,
        version=saga.head_version,
        version_digest=head.digest if head else None,
        capabilities=tuple(sorted(ROLE_CAPABILITIES["publisher"])),
        grant=publisher_grant(saga.destinations),
    )


def _undo_all(runner: SagaRunner, saga: SagaRow, digest: str, uris: tuple[str, ...], actor: str) -> None:
    caller = publisher_caller(saga, digest, actor=actor)
    for uri in uris:
        result = runner.undo(caller, saga.id, uri, digest)
        if result.applied:
            continue
        with runner.transact() as uow:
            step = next(st for st in records.steps(uow.session, saga.id) if st.uri == uri)
            set_step(uow.session, step, StepState.COMPENSATION_FAILED, actor=actor)
        raise Refused(
            f"could not undo {uri}: {result.reason}; the saga stays effect-unknown (retry or reconcile)",
            left=[uri],
        )


def _cancelled(session: Session, saga: SagaRow, actor: str) -> None:
    records.transition(session, saga, SagaEvent.CANCELLED, actor=actor, reason=f"cancelled by {actor}")
    records.void_approvals(session, saga.id, reason="cancelled")
    abandon_open_work(session, saga.id)


def _unsettled(session: Session, saga_id: str, destination: str) -> StepRow:
    step = next((st for st in records.steps(session, saga_id) if st.uri == destination), None)
    if step is None:
        raise InvalidInput(f"{destination} is not a destination of saga {saga_id}")
    if StepState(step.state) not in decider.UNSETTLED:
        raise Refused(f"step {destination} is {step.state}, not uncertain or compensation-failed")
    return step


def _asked_receipt(
    runner: SagaRunner, saga_id: str, destination: str, digest: str, actor: str
) -> dict[str, Any] | None:
    """The destination's receipt through the harness (read only); whatever it says, the person's word
    stands and nothing is published."""
    answer = runner.tools.call(
        ToolCall(
            tool="publish.status",
            arguments={"saga_id": saga_id, "destination": destination, "version_digest": digest},
            call_id=uuid.uuid4().hex,
        ),
        Caller(actor=actor, capabilities=frozenset({"publish.status"}), saga_id=saga_id),
    )
    found = answer.output if answer.status is ToolStatus.OK and isinstance(answer.output, dict) else {}
    if found.get("kind") == "applied" and isinstance(found.get("receipt"), dict):
        return {**found["receipt"], "reconciled_by": actor}
    return None


__all__ = ["TAKEN_DOWN_FROM", "cancel_saga", "reconcile_step", "resume", "takedown"]
