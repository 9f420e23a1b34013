"""Role handlers: what a researcher, writer or reviewer does with one handoff.

Each handler narrows its capabilities (C_child = C_parent ∩ C_task ∩ C_role,
refusing a handoff that asks for more than the role may have), runs its
planner through the harness, and returns a finalizer that commits the saga's
next state with the next handoff, in the consumer's transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy.engine import Engine
from sqlmodel import Session

from orchestrator.core.config import Settings
from orchestrator.core.errors import PolicyRefused
from orchestrator.core.routing import DRAFT, REVIEW, TASKS
from orchestrator.harness.capabilities import ROLE_CAPABILITIES, narrow, require_within
from orchestrator.harness.ports import Planner
from orchestrator.harness.registry import Registry
from orchestrator.store.db import UnitOfWork
from orchestrator.toolpath.engine import Caller, Harness
from orchestrator.toolpath.loop import LoopLimits, run_loop
from outbox.handlers import Dispatch, Finalizer, noop
from outbox.messages import ArtifactRef, Handoff
from roles.artifacts import Evidence
from roles.llm_planner import planner_for
from roles.planners import ResearchPlanner, ReviewPlanner, WriterPlanner
from roles.tools import MACHINE_AUTHORS, load_artifact, person_author, store_artifact
from sagas import records
from sagas.machine import SagaEvent, SagaState
from telemetry import names


@dataclass(frozen=True)
class RolePorts:
    """What the role handlers use, handed in by the composition root."""

    engine: Engine  # read-only sessions; changes commit in the consumer's finalizer
    tools: Harness  # the one tool path (run_loop also records its stop through it)
    dispatch: Dispatch
    settings: Settings
    catalogue: Registry  # read only: the tools a model planner may be shown


LIMITS = LoopLimits(max_steps=12, budget=16, deadline_seconds=300)


def capabilities_for(role: str, handoff: Handoff) -> frozenset[str]:
    role_caps = ROLE_CAPABILITIES[role]
    asked = frozenset(handoff.capabilities)
    require_within(asked, role_caps, who=f"a handoff to the {role}")
    return narrow(asked, role_caps, role_caps)


def _caller(role: str, handoff: Handoff) -> Caller:
    return Caller(
        actor=role,
        capabilities=capabilities_for(role, handoff),
        saga_id=handoff.saga_id,
        span_attributes={names.ATTR_SAGA_ID: handoff.saga_id},
    )


def _fail(saga_id: str, actor: str, reason: str) -> Finalizer:
    def finalize(uow: UnitOfWork) -> None:
        saga = records.load_saga(uow.session, saga_id, lock=True)
        if saga.state == SagaState.PREPARING:
            records.transition(uow.session, saga, SagaEvent.PREPARATION_FAILED, actor=actor, reason=reason)

    return finalize


def _preparing(ports: RolePorts, saga_id: str) -> bool:
    return records.state_of(ports.engine, saga_id) is SagaState.PREPARING


class Stopped(NamedTuple):
    reason: str
    # The saga's durable budget is spent: the saga fails with the reason as it is.
    exhausted: bool = False

    def __str__(self) -> str:
        return self.reason


class Run(NamedTuple):
    """A role's loop: why it stopped early (None: it finished), and its `loop_stopped` event."""

    stopped: Stopped | None
    stop_event: dict[str, Any]

    def then(self, ports: RolePorts, finalize: Finalizer) -> Finalizer:
        """`finalize`, writing the loop's stop first in the same transaction: the stop
        commits with what the loop made (or its failure), and a run whose result is
        not kept (a duplicate, a lost lease) leaves no stop behind."""
        if not self.stop_event:
            return finalize
        store, event = ports.tools.store, self.stop_event

        def with_stop(uow: UnitOfWork) -> None:
            store.record_event(**event, tx=uow)
            finalize(uow)

        return with_stop


def _run(ports: RolePorts, role: str, handoff: Handoff, planner: Planner) -> Run:
    """Run the planner (its stop is written by the finalizer `Run.then` wraps)."""
    try:
        caller = _caller(role, handoff)
    except PolicyRefused as exc:
        return Run(Stopped(str(exc)), {})
    outcome = run_loop(ports.tools, planner, caller, LIMITS, record_stop=False)
    stopped = None if outcome.finished else Stopped(outcome.stop_reason, outcome.exhausted)
    return Run(stopped, outcome.stop_event)


def _spent(saga_id: str, role: str, stopped: Stopped | None) -> Finalizer | None:
    """A spent budget fails the saga with "budget exhausted: …"; nothing is sent after it."""
    if stopped is not None and stopped.exhausted:
        return _fail(saga_id, role, stopped.reason)
    return None


def _wider_than_role(role: str, handoff: Handoff) -> Finalizer | None:
    """A handoff asking for more than the role may have fails the saga, before any work."""
    try:
        capabilities_for(role, handoff)
    except PolicyRefused as exc:
        return _fail(handoff.saga_id, role, f"refused handoff: {exc}")
    return None


def research_handler(ports: RolePorts, handoff: Handoff, holder: str) -> Finalizer:
    if not _preparing(ports, handoff.saga_id):
        return noop
    if refused := _wider_than_role("researcher", handoff):
        return refused
    planner = ResearchPlanner(handoff.saga_id)
    run = _run(ports, "researcher", handoff, planner)
    stopped = run.stopped
    if spent := _spent(handoff.saga_id, "researcher", stopped):
        return run.then(ports, spent)
    if stopped or planner.evidence is None:
        return run.then(
            ports, _fail(handoff.saga_id, "researcher", f"research stopped: {stopped or 'no evidence'}")
        )
    evidence = Evidence.model_validate(planner.evidence)
    if not evidence.passages:
        why = "no passage in the corpus matches the brief"
        if evidence.files_read == 0:
            why = "the corpus has no readable .md or .txt file"
            if evidence.skipped:
                why += " (skipped: " + "; ".join(f"{s.path}: {s.reason}" for s in evidence.skipped[:5]) + ")"
        return run.then(ports, _fail(handoff.saga_id, "researcher", why))

    def finalize(uow: UnitOfWork) -> None:
        digest = store_artifact(uow.session, handoff.saga_id, "evidence", evidence)
        ports.dispatch(
            uow,
            saga_id=handoff.saga_id,
            task=DRAFT,
            artifacts=(ArtifactRef(kind="evidence", digest=digest),),
            capabilities=tuple(sorted(ROLE_CAPABILITIES[TASKS[DRAFT]])),
        )

    return run.then(ports, finalize)


def _ref(handoff: Handoff, kind: str) -> str | None:
    return next((a.digest for a in handoff.artifacts if a.kind == kind), None)


def draft_handler(ports: RolePorts, handoff: Handoff, holder: str) -> Finalizer:
    if not _preparing(ports, handoff.saga_id):
        return noop
    if refused := _wider_than_role("writer", handoff):
        return refused
    evidence_digest = _ref(handoff, "evidence")
    if evidence_digest is None:
        with Session(ports.engine) as s:
            head = records.head(s, records.load_saga(s, handoff.saga_id))
            evidence_digest = head.evidence_digest if head else None
    if evidence_digest is None:
        return _fail(handoff.saga_id, "writer", "no evidence to write from")
    planner = planner_for(
        "writer",
        ports.settings,
        WriterPlanner(handoff.saga_id, evidence_digest, handoff.round, _ref(handoff, "review"), handoff.note),
        registry=ports.catalogue,
    )
    run = _run(ports, "writer", handoff, planner)
    stopped = run.stopped
    if spent := _spent(handoff.saga_id, "writer", stopped):
        return run.then(ports, spent)
    if stopped or planner.result is None:
        why = stopped or getattr(planner, "failure", None) or "no draft"
        return run.then(ports, _fail(handoff.saga_id, "writer", f"writing stopped: {why}"))
    draft_digest = str(planner.result["draft_digest"])

    def finalize(uow: UnitOfWork) -> None:
        s = uow.session
        saga = records.load_saga(s, handoff.saga_id, lock=True)
        body = load_artifact(s, draft_digest)
        head = records.head(s, saga)
        if head is not None and head.markdown == body["markdown"] and head.review:
            # A note or findings the writer cannot act on: say so; do not mint an identical version.
            what = "the rejection" if handoff.note else "the review's findings"
            records.transition(
                s,
                saga,
                SagaEvent.REVISION_UNCHANGED,
                actor="writer",
                reason=f"the writer could not act on {what} (the deterministic writer removes the "
                "sentences of the citations named, e.g. [2]); change the text with `pressroom edit`",
            )
            return
        version = records.add_version(
            s,
            saga,
            title=body["title"],
            markdown=body["markdown"],
            author="writer",
            citations=body["citations"],
            evidence_digest=evidence_digest,
        )
        ports.dispatch(
            uow,
            saga_id=saga.id,
            task=REVIEW,
            version=version.number,
            version_digest=version.digest,
            round=handoff.round,
            artifacts=(ArtifactRef(kind="evidence", digest=evidence_digest),),
            capabilities=tuple(sorted(ROLE_CAPABILITIES[TASKS[REVIEW]])),
        )

    return run.then(ports, finalize)


def review_handler(ports: RolePorts, handoff: Handoff, holder: str) -> Finalizer:
    with Session(ports.engine) as s:
        saga = records.load_saga(s, handoff.saga_id)
        if saga.state != SagaState.PREPARING or handoff.version != saga.head_version:
            return noop
        version = records.version(s, saga.id, saga.head_version)
        sources = sorted({c["source"] for c in version.citations if "source" in c})
        number, digest, evidence_digest = version.number, version.digest, version.evidence_digest
    if refused := _wider_than_role("reviewer", handoff):
        return refused
    planner = ReviewPlanner(handoff.saga_id, number, digest, sources)
    run = _run(ports, "reviewer", handoff, planner)
    stopped = run.stopped
    if spent := _spent(handoff.saga_id, "reviewer", stopped):
        return run.then(ports, spent)
    if stopped or planner.result is None:
        return run.then(
            ports, _fail(handoff.saga_id, "reviewer", f"review stopped: {stopped or 'no report'}")
        )
    review_digest = str(planner.result["review_digest"])
    max_rounds = ports.settings.max_review_rounds

    def finalize(uow: UnitOfWork) -> None:
        s = uow.session
        saga = records.load_saga(s, handoff.saga_id, lock=True)
        report = load_artifact(s, review_digest)
        row = records.version(s, saga.id, number)
        row.review = report
        s.add(row)
        if report["verdict"] == "pass":
            records.transition(s, saga, SagaEvent.REVIEW_PASSED, actor="reviewer", detail={"version": number})
            return
        rules = sorted({f["rule"] for f in report["findings"] if f.get("severity", "error") == "error"})
        person = row.author if row.author not in MACHINE_AUTHORS else person_author(s, saga.id, upto=number)
        if person is not None:
            # A person's words (or the writer's revision of them) are never written again from the
            # evidence: the approver reads the findings, a person may edit again or reject.
            whose = f"{row.author}'s" if person == row.author else f"the writer's revision of {person}'s"
            records.transition(
                s,
                saga,
                SagaEvent.REVIEW_REPORTED,
                actor="reviewer",
                reason=f"the automated review of {whose} version {number} requests changes "
                f"({', '.join(rules)}); approve it as it is or edit again",
                detail={"version": number},
            )
            return
        if saga.review_rounds >= max_rounds:
            records.transition(
                s,
                saga,
                SagaEvent.PREPARATION_FAILED,
                actor="reviewer",
                reason=f"review still requests changes after {saga.review_rounds} revision rounds: {', '.join(rules)}",
            )
            return
        saga.review_rounds += 1
        s.add(saga)
        refs = [ArtifactRef(kind="review", digest=review_digest)]
        if evidence_digest:
            refs.append(ArtifactRef(kind="evidence", digest=evidence_digest))
        ports.dispatch(
            uow,
            saga_id=saga.id,
            task=DRAFT,
            round=saga.review_rounds,
            version=number,
            version_digest=digest,
            artifacts=tuple(refs),
            capabilities=tuple(sorted(ROLE_CAPABILITIES[TASKS[DRAFT]])),
        )

    return run.then(ports, finalize)


__all__ = ["RolePorts", "capabilities_for", "draft_handler", "research_handler", "review_handler"]
