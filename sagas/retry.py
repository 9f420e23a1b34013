"""An operator's retry and fork. Each is an event naming the person.

`retry` of a `failed` saga runs it again from its last good point with the
same keys: an execution that failed publishes again only the steps that are
not live (failed, or undone after the failure) under the approval that
execution already holds; a saga that failed while preparing prepares again.
`retry` of an `effect-unknown` saga whose undo failed runs that undo again.
An uncertain publish is never retried: `reconcile` settles it.

`fork` starts a new saga at `ready-for-review` holding one version's bytes
(same title, markdown, citations and author), for a reviewer to approve. The
fork carries the original's parties into separation of duties: its
`submitted` event names (`detail.parties`) the original's submitter, every
author of its versions and the parties it carried itself, and
`carried_parties` reads them back, so whoever submitted or wrote the
original cannot approve the copy either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlmodel import Session, col, select

from orchestrator.core.errors import Refused
from orchestrator.harness.approvals import session_for
from orchestrator.harness.principals import Party
from orchestrator.store.db import UnitOfWork
from orchestrator.store.events import add_event
from orchestrator.store.tables import ApprovalRow, EventRow, SagaRow, VersionRow
from outbox.handlers import Dispatch
from sagas import records
from sagas.execution_steps import rearm
from sagas.machine import SagaEvent, SagaState, apply
from sagas.reconcile import resume
from sagas.reducer import PRUNED
from sagas.runner import SagaRunner, publisher_caller
from sagas.step_records import set_step
from sagas.step_states import StepState

# Prepares a saga again in the caller's unit of work (a round of every role of its
# pipeline): handed in from above, since the roles sit above the sagas.
Prepare = Callable[[UnitOfWork, SagaRow, str], object]


def retry_saga(runner: SagaRunner, dispatch: Dispatch, saga_id: str, *, actor: str, prepare: Prepare) -> str:
    """Retry; what runs again: `execution`, `undo` or `preparation` (through `prepare`)."""
    with runner.transact() as uow:
        saga = records.load_saga(uow.session, saga_id, lock=True)
        _not_pruned(uow.session, saga)
        if saga.state != SagaState.EFFECT_UNKNOWN:
            return _retry_failed(uow, runner, dispatch, saga, actor, prepare)
        digest, order = _rearm_undos(uow, runner, saga, actor)
    return _retry_undo(runner, dispatch, saga, digest, order, actor)


def _retry_failed(
    uow: UnitOfWork, runner: SagaRunner, dispatch: Dispatch, saga: SagaRow, actor: str, prepare: Prepare
) -> str:
    s = uow.session
    apply(saga.state, SagaEvent.RETRIED)  # refuses anything but failed
    if not _executed(s, saga):
        _retried(uow, saga, SagaEvent.PREPARATION_RETRIED, actor, [])
        prepare(uow, saga, actor)
        return "preparation"
    again = [
        st
        for st in records.steps(s, saga.id)
        if st.state in (StepState.FAILED, StepState.COMPENSATED, StepState.PENDING)
    ]
    for step in again:
        rearm(uow, runner.store, step, actor=actor, reason=f"retried by {actor}")
    for step in records.steps(s, saga.id):
        if step.state == StepState.KEPT:
            # A person confirmed it stayed live: it counts as published, and is undone if this run fails.
            set_step(s, step, StepState.DONE, actor=actor)
    _retried(uow, saga, SagaEvent.RETRIED, actor, [st.uri for st in again])
    resume(dispatch, uow, saga)
    return "execution"


def _rearm_undos(uow: UnitOfWork, runner: SagaRunner, saga: SagaRow, actor: str) -> tuple[str, list[str]]:
    """The head digest and the failed undos, the last completed first, each free to run again."""
    undo = [st for st in records.steps(uow.session, saga.id) if st.state == StepState.COMPENSATION_FAILED]
    if not undo:
        raise Refused(
            f"saga {saga.id} waits on an uncertain publish: reconcile it (retry never re-runs "
            "a step that may have happened)"
        )
    for step in undo:
        # The person says: try the undo again (undoing is idempotent by key).
        undo_key = "undo-" + (step.idempotency_key or "")
        if runner.store.ledger_get(undo_key) is not None:
            runner.store.reconcile(undo_key, "absent", actor=actor, reason="undo retried", within=uow)
    head = records.head(uow.session, saga)
    order = [st.uri for st in sorted(undo, key=lambda st: st.updated_at, reverse=True)]
    return (head.digest if head else ""), order


def _retry_undo(
    runner: SagaRunner, dispatch: Dispatch, saga: SagaRow, digest: str, uris: list[str], actor: str
) -> str:
    """Run the failed undos again now; each that works settles its step, and the runner goes on."""
    caller = publisher_caller(saga, digest, actor=actor)
    for uri in uris:
        result = runner.undo(caller, saga.id, uri, digest)
        if not result.applied:
            raise Refused(f"the undo of {uri} failed again: {result.reason}; the saga stays effect-unknown")
    with runner.transact() as uow:
        s = uow.session
        row = records.load_saga(s, saga.id, lock=True)
        for step in records.steps(s, saga.id):
            if step.uri in uris and step.state != StepState.COMPENSATED:
                set_step(s, step, StepState.COMPENSATED, actor=actor)
        records.transition(
            s,
            row,
            SagaEvent.RECONCILED,
            actor=actor,
            reason=f"undo retried by {actor}: {', '.join(uris)} undone",
            detail={"steps": uris, "retried": True},
        )
        resume(dispatch, uow, row)
    return "undo"


def fork_saga(runner: SagaRunner, saga_id: str, *, version: int, actor: str, actor_id: str | None) -> str:
    """A new saga at ready-for-review with version `version`'s bytes; its id."""
    with runner.transact() as uow:
        s = uow.session
        source = records.load_saga(s, saga_id)
        row = records.version(s, saga_id, version)
        fork = SagaRow(
            brief=source.brief,
            corpus=source.corpus,
            destinations=list(source.destinations),
            state=SagaState.PREPARING.value,
            created_by=actor,
            created_by_id=actor_id,
            trace_context={},
            # A rejection or an edit of the fork prepares it with the original's pipeline.
            pipeline=source.pipeline,
            pipeline_digest=source.pipeline_digest,
        )
        s.add(fork)
        s.flush()
        add_event(
            s,
            saga_id=fork.id,
            actor=actor,
            kind="saga",
            status="submitted",
            detail={
                "destinations": fork.destinations,
                "corpus": fork.corpus,
                "forked_from": _origin(source, row),
                "parties": [_party_detail(p) for p in _source_parties(s, source)],
            },
        )
        copy = records.add_version(
            s,
            fork,
            title=row.title,
            markdown=row.markdown,
            author=row.author,
            citations=list(row.citations),
            evidence_digest=row.evidence_digest,
        )
        copy.author_id, copy.review = row.author_id, row.review
        s.add(copy)
        records.transition(
            s,
            fork,
            SagaEvent.FORKED,
            actor=actor,
            reason=f"forked from {source.id} version {row.number} by {actor}",
        )
        add_event(
            s,
            saga_id=source.id,
            actor=actor,
            kind="saga",
            status="forked",
            detail={"fork": fork.id, "version": row.number, "version_digest": row.digest},
        )
        return fork.id


def carried_parties(s: Session, saga_id: str) -> list[Party]:
    """The parties a fork carries from the saga it was forked from (none for a saga not forked)."""
    submitted = s.exec(
        select(EventRow).where(
            EventRow.saga_id == saga_id, EventRow.kind == "saga", EventRow.status == "submitted"
        )
    ).first()
    found = (submitted.detail or {}).get("parties") if submitted is not None else None
    out = []
    for item in found if isinstance(found, list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            pid = item.get("principal_id")
            out.append(Party(pid if isinstance(pid, str) else None, item["name"], str(item.get("what", ""))))
    return out


def _source_parties(s: Session, source: SagaRow) -> list[Party]:
    parties = [Party(source.created_by_id, source.created_by, f"submitted saga {source.id}, forked here")]
    parties += [
        Party(v.author_id, v.author, f"wrote version {v.number} of saga {source.id}, forked here")
        for v in records.versions(s, source.id)
    ]
    return parties + carried_parties(s, source.id)


def _party_detail(party: Party) -> dict[str, Any]:
    return {"principal_id": party.principal_id, "name": party.name, "what": party.what}


def _retried(uow: UnitOfWork, saga: SagaRow, event: SagaEvent, actor: str, steps: list[str]) -> None:
    records.transition(
        uow.session, saga, event, actor=actor, reason=f"retried by {actor}", detail={"steps": steps}
    )


def _executed(s: Session, saga: SagaRow) -> bool:
    """Did this run's execution start (an approval of the head consumed by it)?"""
    head = records.head(s, saga)
    if head is None:
        return False
    consumed = s.exec(
        select(ApprovalRow).where(
            ApprovalRow.saga_id == saga.id,
            ApprovalRow.version == head.number,
            ApprovalRow.version_digest == head.digest,
            ApprovalRow.consumed_by == session_for(saga.id, saga.run),
            col(ApprovalRow.voided_at).is_(None),
        )
    ).first()
    return consumed is not None


def _not_pruned(s: Session, saga: SagaRow) -> None:
    pruned = s.exec(
        select(EventRow).where(
            EventRow.saga_id == saga.id, EventRow.kind == "saga", EventRow.status == PRUNED
        )
    ).first()
    if pruned is not None:
        raise Refused(f"saga {saga.id} was pruned: its records are gone; fork a version instead")


def _origin(source: SagaRow, row: VersionRow) -> dict[str, Any]:
    return {"saga_id": source.id, "version": row.number, "version_digest": row.digest}


__all__ = ["carried_parties", "fork_saga", "retry_saga"]
