"""Operators' use cases: a published page's takedown, retention, dead letters,
and the relay's sweepers for lapsed approvals, overdue reviews and scheduled pruning.

Like `services`, each changing use case is one unit of work and takes the
caller (`actor`) explicitly, so a permission check can wrap it. Time is
passed in (`now`) where a test needs to move it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from orchestrator import retention
from orchestrator.core.clock import Clock
from orchestrator.core.config import Settings
from orchestrator.core.durations import parse_duration
from orchestrator.core.errors import InvalidInput
from orchestrator.core.routing import TASKS, queue_of
from orchestrator.harness.principals import Permission, Principal, acting, require
from orchestrator.harness.spec import ToolCall, ToolStatus
from orchestrator.people import as_principal
from orchestrator.ports import Drain, Sessions, Transact
from orchestrator.reads.queries import Reads
from orchestrator.store import dead_letters
from orchestrator.store.harness_store import SqlHarnessStore, add_event
from orchestrator.store.people import PeopleStore
from orchestrator.store.tables import SagaRow
from orchestrator.store.work import abandon_open_work
from orchestrator.toolpath.call import Caller
from orchestrator.toolpath.engine import Harness
from outbox.writer import Outbox
from sagas import decider, records
from sagas.execution_steps import approval_refusal
from sagas.machine import SagaEvent, SagaState
from sagas.reconcile import takedown as take_down
from sagas.reducer import PRUNED, snapshot_detail, stored_view
from sagas.runner import SagaRunner
from telemetry import names

SWEEPER = "sweeper"
RETENTION = "retention"
PRUNE_EVERY = 3600.0  # seconds between the relay's scheduled prunes


def write_prune_snapshots(session: Session, saga_ids: Sequence[str]) -> None:
    """One `saga pruned` event per saga whose history retention removed: what that history
    gave (`sagas.reducer.snapshot_detail`), so the log still explains the stored state."""
    for saga_id in saga_ids:
        saga = records.load_saga(session, saga_id)
        steps = {st.uri: (st.state, st.idempotency_key) for st in records.steps(session, saga_id)}
        view = stored_view(saga.state, saga.head_version, steps)
        add_event(
            session,
            saga_id=saga_id,
            actor=RETENTION,
            kind="saga",
            status=PRUNED,
            detail=snapshot_detail(view),
        )


class Operations:
    """Operators' use cases and the relay's sweepers.

    `engine` is for the stores that take one (retention, dead letters);
    `settings` gives PRESSROOM_RECONCILE_WINDOW, PRESSROOM_RETENTION,
    PRESSROOM_REVIEW_REMINDER and PRESSROOM_LEASE_SECONDS; `harness` is the one
    tool path (`ask_unsettled`); `tasks` names every task a worker runs.
    """

    def __init__(
        self,
        *,
        engine: Engine,
        transact: Transact,
        sessions: Sessions,
        drain: Drain,
        reads: Reads,
        people: PeopleStore,
        runner: SagaRunner,
        harness: Harness,
        outbox: Outbox,
        store: SqlHarnessStore,
        settings: Settings,
        signing_key: bytes,
        clock: Clock,
        tasks: Callable[[], Iterable[str]],
    ) -> None:
        self._engine = engine
        self._transact = transact
        self._sessions = sessions
        self._drain = drain
        self._reads = reads
        self._people = people
        self._runner = runner
        self._harness = harness
        self._outbox = outbox
        self._store = store
        self._settings = settings
        self._signing_key = signing_key
        self._clock = clock
        self._tasks = tasks

    def _operator(self, actor: Principal | str, permission: Permission) -> Principal:
        """The caller as a principal holding `permission` (a bare name only in open mode)."""
        return require(as_principal(self._people, actor), permission)

    def prune(
        self,
        *,
        older_than: str,
        dry_run: bool = False,
        actor: Principal | str = "operator",
        now: datetime | None = None,
    ) -> dict[str, Any]:
        """Remove finished sagas' bookkeeping older than `older_than` (see `store.retention`)."""
        who = self._operator(actor, Permission.PRUNE)
        age = parse_duration(older_than)
        report = retention.prune(
            self._engine,
            older_than=age,
            reconcile_window=timedelta(seconds=self._settings.reconcile_window),
            now=now or self._clock.now(),
            dry_run=dry_run,
            snapshot=write_prune_snapshots,
            ledger=self._store,
        )
        return {**report.as_dict(), "older_than": older_than, "actor": who.display}

    def scheduled_prune(self, schedule: retention.RetentionSchedule) -> int:
        """The relay's sweeper for PRESSROOM_RETENTION: rows pruned this time."""
        if self._settings.retention is None or not schedule.due():
            return 0
        report = retention.prune(
            self._engine,
            older_than=timedelta(seconds=self._settings.retention),
            reconcile_window=timedelta(seconds=self._settings.reconcile_window),
            now=self._clock.now(),
            snapshot=write_prune_snapshots,
            ledger=self._store,
        )
        return sum(report.rows.values())

    def takedown(
        self, saga_id: str, *, destination: str, reason: str, actor: Principal | str
    ) -> dict[str, Any]:
        """Take one destination's page of a succeeded saga down (`sagas.reconcile.takedown`);
        an operator's act (the `cancel` permission: it is an undo), with a reason. The saga's status."""
        who = self._operator(actor, Permission.CANCEL)
        if not (reason or "").strip():
            raise InvalidInput("--reason is empty")
        if not (destination or "").strip():
            raise InvalidInput("--dest is empty")
        with self._sessions() as s:
            sid = records.find_saga(s, saga_id).id
        with acting(who):
            step = take_down(
                self._runner, sid, destination=destination, actor=who.display, reason=reason.strip()
            )
        self._drain()
        return {
            **self._reads.status(sid),
            "takedown": {"destination": destination, "step": step, "reason": reason.strip()},
        }

    def list_dead_letters(self, actor: Principal | str = "operator") -> dict[str, Any]:
        self._operator(actor, Permission.DEAD_LETTERS)
        return {"dead_letters": dead_letters.listing(self._engine)}

    def requeue_dead_letter(self, dead_id: str, *, actor: Principal | str) -> dict[str, Any]:
        """Send a dead letter again through the outbox, reopening its work."""
        who = self._operator(actor, Permission.DEAD_LETTERS)
        actor = who.display
        with self._transact() as uow:
            row, payload = dead_letters.requeue(
                uow, dead_id, actor=actor, lease=self._settings.lease_seconds, known_tasks=self._known_tasks()
            )
            assert row.task is not None
            attrs = {names.ATTR_SAGA_ID: row.saga_id} if row.saga_id else {}
            row.requeued_as = self._outbox.add(
                uow,
                saga_id=row.saga_id,
                task=row.task,
                queue=queue_of(row.task),
                payload=payload,
                attributes=attrs,
            )
            uow.session.add(row)
            if row.saga_id:
                add_event(
                    uow.session,
                    saga_id=row.saga_id,
                    actor=actor,
                    kind="message",
                    status="requeued",
                    detail={"dead_letter_id": row.id, "message_id": row.requeued_as},
                )
            out = dead_letters.view(row)
        self._drain()
        return out

    def ask_unsettled(self, saga_id: str, *, actor: Principal | str) -> dict[str, Any]:
        """What each unsettled step's destination says now, for the person about to reconcile it.

        Asked through the tool path's read-only `publish.status` as `actor` (who needs
        `reconcile`), so each question is an event naming them; nothing is published.
        Each item: `uri`, `state`, `answer` (`applied`, `absent`, `unknown`, or
        `not asked` when the step has no key yet), `receipt`, `detail`.
        """
        who = self._operator(actor, Permission.RECONCILE)
        with self._sessions() as s:
            saga = records.find_saga(s, saga_id)
            sid, state = saga.id, saga.state
            steps = [
                (st.uri, st.state, st.version_digest)
                for st in records.steps(s, sid)
                if st.state in decider.UNSETTLED
            ]
        out = []
        for uri, step_state, digest in steps:
            item: dict[str, Any] = {"uri": uri, "state": step_state, "receipt": None}
            if not digest:
                out.append({**item, "answer": "not asked", "detail": "the step has no key yet"})
                continue
            with acting(who):
                result = self._harness.call(
                    ToolCall(
                        tool="publish.status",
                        arguments={"saga_id": sid, "destination": uri, "version_digest": digest},
                        call_id=uuid.uuid4().hex,
                    ),
                    Caller(
                        actor=who.display,
                        capabilities=frozenset({"publish.status"}),
                        saga_id=sid,
                        principal=who,
                    ),
                )
            found = (
                result.output if result.status is ToolStatus.OK and isinstance(result.output, dict) else {}
            )
            if found:
                out.append(
                    {
                        **item,
                        "answer": found.get("kind"),
                        "receipt": found.get("receipt"),
                        "detail": found.get("detail"),
                    }
                )
            else:
                out.append({**item, "answer": "unknown", "detail": result.reason or result.status.value})
        return {"saga_id": sid, "state": state, "destinations": out}

    def sweep_lapsed_approvals(self, now: datetime | None = None) -> int:
        """`approved` sagas whose approval no longer holds go back to ready-for-review."""
        moment = now or self._clock.now()
        with self._sessions() as s:
            ids = list(s.exec(select(SagaRow.id).where(col(SagaRow.state) == SagaState.APPROVED.value)).all())
        moved = 0
        for saga_id in ids:
            with self._transact() as uow:
                saga = records.load_saga(uow.session, saga_id, lock=True)
                head = records.head(uow.session, saga)
                if saga.state != SagaState.APPROVED or head is None:
                    continue
                why = self._lapsed(saga, head.digest, moment)
                if why is None:
                    continue
                records.transition(uow.session, saga, SagaEvent.APPROVAL_LAPSED, actor=SWEEPER, reason=why)
                abandon_open_work(uow.session, saga.id)  # the publish it queued would only find this out
                moved += 1
        return moved

    def _lapsed(self, saga: SagaRow, digest: str, now: datetime) -> str | None:
        """The decider's word on an approved saga at `now`: the lapse reason, or None."""
        why = approval_refusal(
            self._store.find_approval(saga.id, digest), saga, digest, self._signing_key, now
        )
        command = decider.next_command(
            decider.Saga(
                state=SagaState.APPROVED, destinations=tuple(saga.destinations), approval_refusal=why
            ),
            (),
        )
        if isinstance(command, decider.Transition) and command.event is SagaEvent.APPROVAL_LAPSED:
            return command.reason
        return None

    def count_overdue_reviews(self, now: Callable[[], datetime] | None = None) -> Callable[[], int]:
        """A callback for the `pressroom.reviews.overdue` gauge (the relay registers it)."""
        clock = now or self._clock.now

        def count() -> int:
            if self._settings.review_reminder is None:
                return 0
            since = clock() - timedelta(seconds=self._settings.review_reminder)
            with self._sessions() as s:
                found = s.exec(
                    select(func.count())
                    .select_from(SagaRow)
                    .where(
                        col(SagaRow.state) == SagaState.READY_FOR_REVIEW.value, col(SagaRow.ready_at) <= since
                    )
                ).one()
            return int(found)

        return count

    def _known_tasks(self) -> dict[str, str]:
        """Every task a worker runs, by its queue: the fixed ones and each registered role kind's."""
        return {**TASKS, **{task: queue_of(task) for task in self._tasks()}}


__all__ = ["PRUNE_EVERY", "Operations", "write_prune_snapshots"]
