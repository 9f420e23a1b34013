"""The publishing saga runner: one step per destination, in order.

`approved → executing`; each step is a `publish` call through the harness.
All acked: `succeeded`. A definite failure compensates the completed steps
in reverse order, then `failed`. A maybe-applied outcome the destination
cannot settle leaves the step `uncertain` and the saga `effect-unknown`,
where only a person moves it on (`reconcile`, `cancel`).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlmodel import Session

from orchestrator.app import App, Finalizer, noop
from orchestrator.errors import RetryLater
from orchestrator.harness.approvals import ApprovalRequest, refusal, session_for
from orchestrator.harness.capabilities import ROLE_CAPABILITIES
from orchestrator.harness.digests import business_key
from orchestrator.harness.engine import Caller
from orchestrator.harness.spec import ToolCall, ToolResult, ToolStatus
from orchestrator.store.db import UnitOfWork, unit_of_work
from orchestrator.store.tables import LedgerRow, SagaRow, StepRow, utcnow
from orchestrator.store.work import renew_lease
from outbox.messages import Handoff
from sagas import records
from sagas.machine import SagaEvent, SagaState
from telemetry import metrics, names

PUBLISHER = "publisher"


def publisher_caller(saga: SagaRow, digest: str) -> Caller:
    return Caller(
        actor=PUBLISHER,
        capabilities=ROLE_CAPABILITIES["publisher"],
        saga_id=saga.id,
        span_attributes={
            names.ATTR_SAGA_ID: saga.id,
            names.ATTR_VERSION: saga.head_version,
            names.ATTR_VERSION_DIGEST: digest,
        },
    )


def start_execution(session: Session, saga: SagaRow, digest: str) -> list[StepRow]:
    """Create the step rows (once) and move `approved → executing`."""
    existing = {s.uri: s for s in records.steps(session, saga.id)}
    for position, uri in enumerate(saga.destinations):
        step = existing.get(uri)
        key = business_key(saga.id, uri, digest)
        if step is None:
            step = StepRow(saga_id=saga.id, uri=uri, position=position)
        if step.idempotency_key != key:
            step.state, step.receipt, step.idempotency_key, step.version_digest = "pending", None, key, digest
        session.add(step)
    if saga.state == SagaState.APPROVED:
        records.transition(session, saga, SagaEvent.EXECUTION_STARTED, actor=PUBLISHER)
    return records.steps(session, saga.id)


def publish_handler(app: App, handoff: Handoff, holder: str) -> Finalizer:
    with unit_of_work(app.engine) as uow:
        saga = records.load_saga(uow.session, handoff.saga_id, lock=True)
        head = records.head(uow.session, saga)
        if saga.state not in (SagaState.APPROVED, SagaState.EXECUTING) or head is None:
            return noop
        digest = head.digest
        if saga.state == SagaState.APPROVED:
            lapsed = _approval_lapsed(app, saga, digest)
            if lapsed:
                records.transition(
                    uow.session, saga, SagaEvent.APPROVAL_LAPSED, actor=PUBLISHER, reason=lapsed
                )
                return noop
        start_execution(uow.session, saga, digest)
        caller = publisher_caller(saga, digest)
        order = [s.uri for s in records.steps(uow.session, saga.id)]
    done: list[str] = []
    for uri in order:
        renew_lease(app.engine, handoff.work_id, holder, app.settings.lease_seconds)
        result = call_tool(app, caller, "publish", saga.id, uri, digest)
        if result.applied:
            done.append(uri)
            continue
        if result.status is ToolStatus.UNCERTAIN:
            return _finish_uncertain(saga.id, uri, result)
        if isinstance(result.output, dict) and result.output.get("approver_lapsed"):
            return approver_lapsed(app, caller, saga.id, uri, result, done, digest)
        if isinstance(result.output, dict) and result.output.get("in_flight"):
            # Another call holds this step's key: neither a failure nor a success yet.
            raise RetryLater(f"{uri}: {result.reason}", saga_id=saga.id)
        compensate(app, caller, saga.id, list(reversed(done)), digest)
        return _finish_failed(saga.id, uri, result)
    return _finish_succeeded(saga.id)


def approver_lapsed(
    app: App, caller: Caller, saga_id: str, uri: str, result: ToolResult, done: list[str], digest: str
) -> Finalizer:
    """The approver was revoked or lost reviewer before `uri`'s intent: nothing was sent
    there; undo the steps already published, and hand the saga back to the reviewers."""
    left = compensate(app, caller, saga_id, list(reversed(done)), digest)
    reason = f"{uri}: not published: {result.reason}"

    def finalize(uow: UnitOfWork) -> None:
        saga = records.load_saga(uow.session, saga_id, lock=True)
        if saga.state == SagaState.EXECUTING:
            for step in records.steps(uow.session, saga_id):
                if step.uri in done and step.uri not in left and step.idempotency_key:
                    # Undone: a later approval publishes it again under the same key
                    # (as `reconcile --outcome absent` would allow).
                    ledger = uow.session.get(LedgerRow, step.idempotency_key, with_for_update=True)
                    if ledger is not None:
                        ledger.status = "absent"
                        uow.session.add(ledger)
                    step.state = "pending"
                    uow.session.add(step)
            records.transition(
                uow.session,
                saga,
                SagaEvent.APPROVAL_LAPSED,
                actor=PUBLISHER,
                reason=reason,
                detail={"destination": uri, "compensated": [u for u in done if u not in left]},
            )

    return finalize


def _approval_lapsed(app: App, saga: SagaRow, digest: str) -> str | None:
    """Why the saga's approval can no longer start an execution, if it cannot."""
    approval = app.store.find_approval(saga.id, digest)
    session = session_for(saga.id, saga.run)
    want = ApprovalRequest(
        saga_id=saga.id,
        version_digest=digest,
        destination=saga.destinations[0],
        session=session,
        execution=session,
    )
    why = refusal(approval, want, key=app.signing_key, now=datetime.now(UTC))
    return f"approval lapsed before publishing: {why}" if why else None


def call_tool(app: App, caller: Caller, tool: str, saga_id: str, uri: str, digest: str) -> ToolResult:
    return app.harness.call(
        ToolCall(
            tool=tool,
            arguments={"saga_id": saga_id, "destination": uri, "version_digest": digest},
            call_id=uuid.uuid4().hex,
        ),
        caller,
    )


def compensate(app: App, caller: Caller, saga_id: str, uris: list[str], digest: str) -> list[str]:
    """Undo the given steps, in the order given; the ones that could not be undone."""
    left: list[str] = []
    for uri in uris:
        result = call_tool(app, caller, "publish.compensate", saga_id, uri, digest)
        if not result.applied:
            left.append(uri)
    return left


def _set_step(session: Session, saga_id: str, uri: str, state: str) -> None:
    for step in records.steps(session, saga_id):
        if step.uri == uri:
            step.state = state
            step.updated_at = utcnow()
            session.add(step)


def _finish_uncertain(saga_id: str, uri: str, result: ToolResult) -> Finalizer:
    def finalize(uow: UnitOfWork) -> None:
        saga = records.load_saga(uow.session, saga_id, lock=True)
        _set_step(uow.session, saga_id, uri, "uncertain")
        if saga.state == SagaState.EXECUTING:
            records.transition(
                uow.session,
                saga,
                SagaEvent.STEP_UNCERTAIN,
                actor=PUBLISHER,
                reason=f"{uri}: {result.reason}",
                detail={"destination": uri, "key": result.idempotency_key},
            )
            metrics.record_effect_unknown(uri.split(":", 1)[0])

    return finalize


def _finish_failed(saga_id: str, uri: str, result: ToolResult) -> Finalizer:
    def finalize(uow: UnitOfWork) -> None:
        saga = records.load_saga(uow.session, saga_id, lock=True)
        _set_step(uow.session, saga_id, uri, "failed")
        if saga.state == SagaState.EXECUTING:
            records.transition(
                uow.session,
                saga,
                SagaEvent.STEP_FAILED,
                actor=PUBLISHER,
                reason=f"{uri}: {result.status.value}: {result.reason}",
                detail={"destination": uri},
            )
            _record_duration(saga)

    return finalize


def _finish_succeeded(saga_id: str) -> Finalizer:
    def finalize(uow: UnitOfWork) -> None:
        saga = records.load_saga(uow.session, saga_id, lock=True)
        if saga.state == SagaState.EXECUTING and all(
            s.state == "done" for s in records.steps(uow.session, saga_id)
        ):
            records.transition(uow.session, saga, SagaEvent.ALL_ACKED, actor=PUBLISHER, reason=None)
            _record_duration(saga)

    return finalize


def _record_duration(saga: SagaRow) -> None:
    metrics.record_saga_finished(saga.state, (utcnow() - saga.created_at).total_seconds())


__all__ = [
    "approver_lapsed",
    "call_tool",
    "compensate",
    "publish_handler",
    "publisher_caller",
    "start_execution",
]
