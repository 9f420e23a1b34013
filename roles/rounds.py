"""A saga's preparation rounds, carried out: the database side of `sagas.preparation`.

Every function here runs inside the caller's unit of work, with the saga's
row locked, so a run's outcome, the saga's next state and the messages that
start the next roles commit together (invariant 8).

* `start_round` opens a round (`saga.prep_round` + 1) of the roles a caller
  chose (`every_role` at submit and on retry, `revision` on a rejection,
  `reviewers` on an edit): one `role_runs` row each, `waiting`, then advances.
* `finish_run` writes how a role's run ended (its turn's `Outcome`), then
  advances.
* `advance` asks the pure decider what follows and carries the command out:
  it dispatches the roles to start (`queued`), or moves the saga on.

A message names its round (`Handoff.round`); one from an earlier round finds
the saga in a later one and changes nothing (the role handler checks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from sqlmodel import Session, col, select

from orchestrator.core.pipeline import Pipeline, RoleDecl
from orchestrator.harness.handles import Grant, Task
from orchestrator.store.db import UnitOfWork
from orchestrator.store.tables import RoleRunRow, SagaRow, VersionRow, utcnow
from outbox.handlers import Dispatch
from outbox.messages import ArtifactRef
from roles import reviews
from roles.artifacts import ReviewReport
from roles.plans import default_pipeline, kind_of, plan_of, saga_pipeline
from roles.tools import MACHINE_AUTHORS, person_author
from sagas import records
from sagas.machine import SagaEvent
from sagas.preparation import (
    Command,
    Failed,
    Node,
    OutOfRounds,
    Passed,
    Reported,
    Revise,
    Run,
    RunState,
    Situation,
    Start,
    Unchanged,
    decide,
)

Choose = Callable[[Iterable[Node]], tuple[str, ...]]


@dataclass(frozen=True)
class Outcome:
    """How a role's run ended, as its turn reports it."""

    state: Literal[RunState.DONE, RunState.UNCHANGED, RunState.FAILED]
    verdict: Literal["pass", "fail"] | None = None
    result_digest: str | None = None
    reason: str | None = None

    @classmethod
    def done(cls, result_digest: str | None, verdict: Literal["pass", "fail"] | None = None) -> Outcome:
        return cls(RunState.DONE, verdict, result_digest)

    @classmethod
    def failed(cls, reason: str) -> Outcome:
        return cls(RunState.FAILED, reason=reason)

    @classmethod
    def unchanged(cls, reason: str) -> Outcome:
        return cls(RunState.UNCHANGED, reason=reason)


# -- rounds ------------------------------------------------------------------------------


def start_round(
    uow: UnitOfWork,
    dispatch: Dispatch,
    saga: SagaRow,
    roles: Iterable[str],
    *,
    max_revisions: int,
    actor: str,
    note: str | None = None,
    artifacts: tuple[ArtifactRef, ...] = (),
) -> Command:
    """A new round of `roles`, each `waiting`, then the first of them started.

    `note` (a person's rejection) and `artifacts` (the review to answer) go to
    the round's writers that start at once.
    """
    s = uow.session
    saga.prep_round += 1
    s.add(saga)
    for role in roles:
        s.add(RoleRunRow(saga_id=saga.id, round=saga.prep_round, role=role, state=RunState.WAITING.value))
    return advance(
        uow, dispatch, saga, max_revisions=max_revisions, actor=actor, note=note, artifacts=artifacts
    )


def start_chosen(
    uow: UnitOfWork,
    dispatch: Dispatch,
    saga: SagaRow,
    choose: Choose,
    *,
    max_revisions: int,
    actor: str,
    note: str | None = None,
) -> Command:
    """`start_round` of the roles `choose` (`every_role`, `revision`, `reviewers`) picks."""
    plan = plan_of(saga_pipeline(uow.session, saga))
    return start_round(uow, dispatch, saga, choose(plan), max_revisions=max_revisions, actor=actor, note=note)


def finish_run(
    uow: UnitOfWork, dispatch: Dispatch, saga: SagaRow, role: str, outcome: Outcome, *, max_revisions: int
) -> Command | None:
    """Record how `role`'s run of the current round ended, then advance.

    None (and nothing written) when the round has no unfinished run of `role`:
    a copy of a message already applied, or a role outside the round.
    """
    s = uow.session
    row = s.get(RoleRunRow, (saga.id, saga.prep_round, role))
    if row is None or row.state not in (RunState.WAITING, RunState.QUEUED):
        return None
    row.state, row.verdict = outcome.state.value, outcome.verdict
    row.result_digest, row.reason, row.updated_at = outcome.result_digest, outcome.reason, utcnow()
    s.add(row)
    if outcome.verdict is not None and outcome.result_digest is not None:
        _review_on_head(s, saga)
    return advance(uow, dispatch, saga, max_revisions=max_revisions, actor=role)


def advance(
    uow: UnitOfWork,
    dispatch: Dispatch,
    saga: SagaRow,
    *,
    max_revisions: int,
    actor: str,
    note: str | None = None,
    artifacts: tuple[ArtifactRef, ...] = (),
) -> Command:
    """Ask `decide` what follows in the current round and carry it out; the command."""
    s = uow.session
    pipeline = saga_pipeline(s, saga)
    plan = plan_of(pipeline)
    rows = runs_of(s, saga.id, saga.prep_round)
    runs = {r.role: Run(r.role, RunState(r.state), _verdict(r.verdict), r.reason) for r in rows.values()}
    failing = any(run.verdict == "fail" for run in runs.values())
    situation = Situation(
        runs,
        revisions_done=saga.review_rounds,
        max_revisions=max_revisions,
        person_text=failing and _person(s, saga) is not None,
    )
    command = decide(plan, situation)
    if isinstance(command, Start):
        for name in command.roles:
            _start(uow, dispatch, saga, pipeline, plan, pipeline.role(name), note=note, artifacts=artifacts)
            rows[name].state, rows[name].updated_at = RunState.QUEUED.value, utcnow()
            s.add(rows[name])
    elif isinstance(command, Passed):
        detail = {"version": saga.head_version}
        records.transition(s, saga, SagaEvent.REVIEW_PASSED, actor=actor, detail=detail)
    elif isinstance(command, Unchanged):
        reason = runs[command.role].reason or f"the {command.role} role changed nothing"
        records.transition(s, saga, SagaEvent.REVISION_UNCHANGED, actor=command.role, reason=reason)
    elif isinstance(command, Failed):
        records.transition(s, saga, SagaEvent.PREPARATION_FAILED, actor=command.role, reason=command.reason)
    elif isinstance(command, Reported):
        _reported(s, saga, rows, command, actor)
    elif isinstance(command, OutOfRounds):
        rules = reviews.error_rules(reviews.merged(_failed_reports(s, rows, command.failed)))
        reason = (
            f"review still requests changes after {saga.review_rounds} revision rounds: {', '.join(rules)}"
        )
        records.transition(s, saga, SagaEvent.PREPARATION_FAILED, actor=actor, reason=reason)
    elif isinstance(command, Revise):
        review = reviews.store_merged(s, saga.id, _failed_reports(s, rows, command.failed))
        saga.review_rounds += 1
        s.add(saga)
        start_round(
            uow,
            dispatch,
            saga,
            command.rerun,
            max_revisions=max_revisions,
            actor=actor,
            artifacts=(ArtifactRef(kind="review", digest=review),),
        )
    return command


def runs_of(session: Session, saga_id: str, round: int) -> dict[str, RoleRunRow]:
    """The runs of one round of a saga, by role."""
    rows = session.exec(select(RoleRunRow).where(RoleRunRow.saga_id == saga_id, RoleRunRow.round == round))
    return {row.role: row for row in rows}


# -- carrying a command out -------------------------------------------------------------


def _start(
    uow: UnitOfWork,
    dispatch: Dispatch,
    saga: SagaRow,
    pipeline: Pipeline,
    plan: tuple[Node, ...],
    role: RoleDecl,
    *,
    note: str | None,
    artifacts: tuple[ArtifactRef, ...],
) -> None:
    """Send `role` its work: what its kind reads (evidence, a review, the head version)."""
    s = uow.session
    kind = kind_of(pipeline, role)
    head = records.head(s, saga)
    refs: tuple[ArtifactRef, ...] = ()
    if kind.produces == "version":
        evidence = _evidence_for(s, saga, plan, role) or (head.evidence_digest if head else None)
        refs = (*((ArtifactRef(kind="evidence", digest=evidence),) if evidence else ()), *artifacts)
    elif kind.produces == "verdict" and head is not None and head.evidence_digest:
        refs = (ArtifactRef(kind="evidence", digest=head.evidence_digest),)
    dispatch(
        uow,
        saga_id=saga.id,
        task=kind.task,
        artifacts=refs,
        capabilities=tuple(sorted(kind.capabilities)),
        version=head.number if head is not None and kind.produces != "evidence" else None,
        version_digest=head.digest if head is not None and kind.produces != "evidence" else None,
        round=saga.prep_round,
        note=note if kind.produces == "version" else None,
        role=role.name,
        uses_model=role.uses_model,
        grant=role_grant(saga, kind.capabilities, role),
    )


def role_grant(saga: SagaRow, table: frozenset[str], role: RoleDecl) -> Grant:
    """The handle a role's handoff carries: its kind's table ∩ the task (the role's declared
    `mcp:SERVER/TOOL` tools, the saga's corpus). A declared tool's capability is its name,
    so the declaration is both the table's entry and the task's for such a tool."""
    tools = frozenset(role.tools)
    actions = table | tools
    return Grant(role.name, actions, Task(actions=actions, corpus=saga.corpus, tools=tools))


def _evidence_for(session: Session, saga: SagaRow, plan: tuple[Node, ...], role: RoleDecl) -> str | None:
    """The evidence the latest done run of a research role before `role` recorded, any round."""
    by_name = {n.name: n for n in plan}
    before: set[str] = set()
    stack = list(role.after)
    while stack:
        name = stack.pop()
        if name not in before:
            before.add(name)
            stack.extend(by_name[name].after)
    researchers = sorted(n for n in before if by_name[n].produces == "evidence")
    if not researchers:
        return None
    found = session.exec(
        select(RoleRunRow.result_digest)
        .where(
            RoleRunRow.saga_id == saga.id,
            col(RoleRunRow.role).in_(researchers),
            RoleRunRow.state == RunState.DONE.value,
            col(RoleRunRow.result_digest).is_not(None),
        )
        .order_by(col(RoleRunRow.round).desc())
        .limit(1)
    ).first()
    return found


def _review_on_head(session: Session, saga: SagaRow) -> None:
    """The head version's review: the merge of the reports of this round's reviewers so far."""
    done = [
        (row.role, row.result_digest)
        for row in runs_of(session, saga.id, saga.prep_round).values()
        if row.verdict is not None and row.result_digest is not None
    ]
    order = {role.name: i for i, role in enumerate(saga_pipeline(session, saga).roles)}
    done.sort(key=lambda pair: order.get(pair[0], len(order)))
    head = records.head(session, saga)
    if head is None or not done:
        return
    head.review = reviews.version_review(reviews.reports(session, done), dict(done))
    session.add(head)


def _failed_reports(
    session: Session, rows: dict[str, RoleRunRow], failed: tuple[str, ...]
) -> list[tuple[str, ReviewReport]]:
    digests = [(role, rows[role].result_digest) for role in failed]
    return reviews.reports(session, [(role, digest) for role, digest in digests if digest is not None])


def _person(session: Session, saga: SagaRow) -> str | None:
    """The person whose text the head version is or descends from (None: the writer's own)."""
    head = records.head(session, saga)
    if head is None:
        return None
    if head.author not in MACHINE_AUTHORS:
        return head.author
    return person_author(session, saga.id, upto=head.number)


def _reported(
    session: Session, saga: SagaRow, rows: dict[str, RoleRunRow], command: Reported, actor: str
) -> None:
    """A person's words (or the writer's revision of them) are never written again from the
    evidence: the approver reads the findings; a person may edit again or reject."""
    head: VersionRow | None = records.head(session, saga)
    person = _person(session, saga)
    number = saga.head_version
    author = head.author if head is not None else person
    whose = f"{author}'s" if person == author else f"the writer's revision of {person}'s"
    rules = reviews.error_rules(reviews.merged(_failed_reports(session, rows, command.failed)))
    records.transition(
        session,
        saga,
        SagaEvent.REVIEW_REPORTED,
        actor=actor,
        reason=f"the automated review of {whose} version {number} requests changes "
        f"({', '.join(rules)}); approve it as it is or edit again",
        detail={"version": number},
    )


def _verdict(value: str | None) -> Literal["pass", "fail"] | None:
    return "pass" if value == "pass" else "fail" if value == "fail" else None


__all__ = [
    "Outcome",
    "advance",
    "default_pipeline",
    "finish_run",
    "kind_of",
    "plan_of",
    "role_grant",
    "runs_of",
    "saga_pipeline",
    "start_chosen",
    "start_round",
]
