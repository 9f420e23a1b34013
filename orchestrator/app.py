"""The assembled application: what `bootstrap.build_app` hands every entry point.

It owns dispatching work (a lease row plus an outbox row, in the caller's
unit of work) and consuming it (inbox check, lease, handler, completion in
one transaction with the handler's state change).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from pydantic import ValidationError
from sqlalchemy import Table, bindparam, inspect, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.util import identity_key
from sqlmodel import Session

from orchestrator.core.clock import Clock
from orchestrator.core.config import Settings
from orchestrator.core.errors import InvalidInput, NotFound, Parked, Refused, RetryLater
from orchestrator.core.routing import queue_of
from orchestrator.harness.principals import acting
from orchestrator.harness.registry import Registry
from orchestrator.store import dead_letters
from orchestrator.store.adapter import adapter_for
from orchestrator.store.db import UnitOfWork, relaxed_commit, unit_of_work
from orchestrator.store.harness_store import SqlHarnessStore
from orchestrator.store.people import SqlPeopleStore
from orchestrator.store.tables import SagaRow
from orchestrator.store.work import claim_lease, give_back, new_work
from orchestrator.toolpath.engine import Harness
from outbox.broker import Broker, InlineBroker
from outbox.handlers import Finalizer, Handler
from outbox.inbox import already_applied, settle
from outbox.messages import ArtifactRef, Envelope, Handoff
from outbox.relay import Relay
from outbox.writer import Outbox
from roles.index import CorpusIndexes
from sagas.runner import SagaRunner
from telemetry import names, propagation, spans

log = logging.getLogger(__name__)


@dataclass
class App:
    settings: Settings
    engine: Engine
    registry: Registry
    store: SqlHarnessStore
    harness: Harness
    broker: Broker
    outbox: Outbox
    signing_key: bytes
    people: SqlPeopleStore
    runner: SagaRunner
    clock: Clock
    handlers: dict[str, Handler] = field(default_factory=dict)
    relay: Relay | None = None
    # The corpus indexes research and review share (set by `build_app`).
    indexes: CorpusIndexes | None = None
    # inline://: deliver queued work before a use case returns. The demo turns
    # this off and lets its worker threads deliver instead.
    auto_drain: bool = True
    # `memory:` destinations at submit: for tests and `pressroom eval` only,
    # turned on by `build_app(memory_destinations=True)`, never by a setting.
    memory_destinations: bool = False
    # Queues whose work takes its lease inside its final transaction on
    # PostgreSQL (`folds_lease`): short work that never renews its lease.
    short_queues: frozenset[str] = frozenset({"writer", "reviewer"})

    def close(self) -> None:
        """Write the sent-marks still queued, then let the database go: an App whose
        database is about to be removed (a test's, an evaluation run's) closes first."""
        self.outbox.marks.close()
        self.engine.dispose()

    # -- producing ---------------------------------------------------------
    def dispatch(
        self,
        uow: UnitOfWork,
        *,
        saga_id: str,
        task: str,
        artifacts: tuple[ArtifactRef, ...] = (),
        capabilities: tuple[str, ...] = (),
        version: int | None = None,
        version_digest: str | None = None,
        round: int = 0,
        note: str | None = None,
        role: str | None = None,
        uses_model: bool = False,
    ) -> str:
        """Queue `task` for `saga_id`: a work row with a lease and an outbox row."""
        queue = queue_of(task)
        work = new_work(
            uow.session,
            saga_id=saga_id,
            task=task,
            queue=queue,
            payload={},
            lease=self.settings.lease_seconds,
        )
        handoff = Handoff(
            saga_id=saga_id,
            work_id=work.id,
            artifacts=artifacts,
            capabilities=capabilities,
            version=version,
            version_digest=version_digest,
            round=round,
            note=note,
            role=role,
            uses_model=uses_model,
        )
        work.payload = handoff.model_dump(mode="json")
        attrs: dict[str, Any] = {names.ATTR_SAGA_ID: saga_id}
        if version is not None:
            attrs[names.ATTR_VERSION] = version
        if version_digest:
            attrs[names.ATTR_VERSION_DIGEST] = version_digest
        if trace.get_current_span().get_span_context().is_valid:
            return self.outbox.add(
                uow, saga_id=saga_id, task=task, queue=queue, payload=work.payload, attributes=attrs
            )
        # A person's command (approve, reject, edit, reconcile): join the saga's trace.
        with _joined_span(f"dispatch {task}", uow, saga_id):
            return self.outbox.add(
                uow, saga_id=saga_id, task=task, queue=queue, payload=work.payload, attributes=attrs
            )

    def resend(
        self, uow: UnitOfWork, task: str, payload: dict[str, Any], saga_id: str, *, why: str = "recover"
    ) -> str:
        """Send existing work again through the outbox: `recover` after its lease ran
        out, `resume` when a parked delivery's destination has a free turn."""
        with _joined_span(f"{why} {task}", uow, saga_id):
            return self.outbox.add(
                uow,
                saga_id=saga_id,
                task=task,
                queue=queue_of(task),
                payload=payload,
                attributes={names.ATTR_SAGA_ID: saga_id},
            )

    # -- consuming ---------------------------------------------------------
    def handle(self, env: Envelope) -> str:
        """Apply one message at most once; returns what happened (for logs and tests)."""
        # Work is done by the saga's agents, whoever's command queued it (inline:// drains
        # inside a person's command): their events carry no person.
        with acting(None):
            return self._handle(env)

    def _handle(self, env: Envelope) -> str:
        try:
            handoff = Handoff.model_validate(env.payload)
        except ValidationError as exc:
            log.error("malformed message %s set aside as a dead letter: %s", env.message_id, exc)
            self.dead_letter(env, f"malformed handoff: {_explain(exc)}")
            return "dead-letter"
        if env.task not in self.handlers:
            self.dead_letter(env, f"no handler for task {env.task!r}", work_id=handoff.work_id)
            return "dead-letter"
        attrs = {names.ATTR_SAGA_ID: handoff.saga_id}
        with propagation.process_span(env.queue, env.message_id, self.broker.system, env.headers, attrs):
            if self.folds_lease(env.queue, handoff):
                outcome = self._handle_in_one_transaction(env, handoff)
            else:
                outcome = self._handle_with_lease_first(env, handoff)
            if outcome == "applied":
                # Committed: the broker's ack follows when this task returns.
                with propagation.settle_span(env.queue, env.message_id, self.broker.system, attrs):
                    pass
        return outcome

    def folds_lease(self, queue: str, handoff: Handoff | None = None) -> bool:
        """Whether this queue's work takes its lease inside its final transaction.

        PostgreSQL only, and only for short work that never renews its lease nor
        touches its work row from another connection: the writer and the
        reviewer. The researcher may index a large corpus first (minutes), and
        its lease is what shows that it is at work; the publisher's destination
        calls may be slow and its runner renews the lease between destinations,
        on a connection of its own. Both take the lease first. So does work whose
        planner calls a model (`Handoff.uses_model`, or any writer under `PRESSROOM_MODEL`): a
        model call never runs inside
        an open transaction nor while the work row's lock is held.
        """
        if self.settings.model or (handoff is not None and handoff.uses_model):
            return False
        return queue in self.short_queues and adapter_for(self.engine).fold_lease_in_final_tx

    def _handle_with_lease_first(self, env: Envelope, handoff: Handoff) -> str:
        """The lease in a relaxed transaction of its own, then the handler, then the
        inbox row, the completion and the handler's changes in one durable commit."""
        with unit_of_work(self.engine) as uow:
            taken = claim_lease(uow.session, handoff.work_id, env.message_id, self.settings.lease_seconds)
            if taken is None:
                return self._not_taken(uow, env, handoff)
            relaxed_commit(uow.session)
        handler = self.handlers[env.task]
        try:
            finalize = handler(handoff, env.message_id)
        except Parked as exc:
            give_back(self.engine, handoff.work_id, env.message_id, self.settings.lease_seconds)
            return self._parked(env, handoff, exc)
        except RetryLater as exc:
            # The lease is kept: the sweeper sends the work again once it runs out.
            return self._deferred(env, handoff, exc)
        except (InvalidInput, NotFound, Refused) as exc:
            return self._set_aside(env, handoff, exc)
        try:
            with unit_of_work(self.engine) as uow:
                return self._settled(uow, env, handoff, finalize)
        except IntegrityError:
            # A copy of this message committed its inbox row first: nothing applied twice.
            return "duplicate"

    def _handle_in_one_transaction(self, env: Envelope, handoff: Handoff) -> str:
        """Lease, handler, inbox row with the completion (`settle`) and the handler's
        changes in one transaction on one connection, committed once (durably).

        The lease is the work row's lock while the handler runs: a duplicate copy
        finds it held at once (`claim_lease` skips locked rows) and the sweeper
        skips the row. Whenever the handler ends without its result (it defers,
        or raises something unexpected) the lease is committed, relaxed, exactly
        as the lease-first path would have left it. A consumer that dies leaves
        the row as it was before the delivery: the sweeper resends the work when
        the lease it had runs out, without counting an attempt (as for a message
        the broker lost).
        """
        try:
            with unit_of_work(self.engine) as uow:
                taken = claim_lease(uow.session, handoff.work_id, env.message_id, self.settings.lease_seconds)
                if taken is None:
                    return self._not_taken(uow, env, handoff)
                try:
                    finalize = self.handlers[env.task](handoff, env.message_id)
                except Parked as exc:
                    uow.session.rollback()  # the claim goes: the work is as it was before this delivery
                    return self._parked(env, handoff, exc)
                except RetryLater as exc:
                    relaxed_commit(uow.session)
                    uow.session.commit()
                    return self._deferred(env, handoff, exc)
                except (InvalidInput, NotFound, Refused) as exc:
                    uow.session.rollback()  # the work row's lock goes before it is set aside
                    return self._set_aside(env, handoff, exc)
                except BaseException:
                    relaxed_commit(uow.session)
                    uow.session.commit()
                    raise
                return self._settled(uow, env, handoff, finalize)
        except IntegrityError:
            return "duplicate"

    def _settled(self, uow: UnitOfWork, env: Envelope, handoff: Handoff, finalize: Finalizer) -> str:
        """The end of a message's final transaction: its inbox row with its work's completion
        and the `message applied` event (one statement on PostgreSQL), then the handler's
        changes; or a rollback and why."""
        settled = settle(
            uow.session,
            env.message_id,
            env.task,
            work_id=handoff.work_id,
            saga_id=handoff.saga_id,
            event={
                "actor": env.task,
                "kind": "message",
                "status": "applied",
                "detail": {"message_id": env.message_id, "work_id": handoff.work_id},
            },
        )
        if settled != "applied":
            uow.session.rollback()
            return settled
        finalize(uow)
        return settled

    def _not_taken(self, uow: UnitOfWork, env: Envelope, handoff: Handoff) -> str:
        """The lease was not ours to take: the message was applied already (its inbox
        row commits with its work's completion, so done work is where a duplicate
        lands), or the work is done otherwise or held by another copy."""
        applied = already_applied(uow.session, env.message_id)
        uow.session.rollback()
        return "duplicate" if applied else self._lease_held(env, handoff)

    def _lease_held(self, env: Envelope, handoff: Handoff) -> str:
        self.store.record_event(
            saga_id=handoff.saga_id,
            actor=env.task,
            kind="message",
            status="dropped",
            detail={"message_id": env.message_id, "reason": "work done or its lease is held"},
        )
        return "lease-held"

    def _deferred(self, env: Envelope, handoff: Handoff, exc: RetryLater) -> str:
        self.store.record_event(
            saga_id=handoff.saga_id,
            actor=env.task,
            kind="message",
            status="deferred",
            detail={"message_id": env.message_id, "reason": str(exc)},
        )
        return "deferred"

    def _parked(self, env: Envelope, handoff: Handoff, exc: Parked) -> str:
        """The lease is back: record why (the event, and on the delivery's span), then have
        the work sent again when a turn is free."""
        self._deferred(env, handoff, exc)
        span = trace.get_current_span()
        if span.is_recording():
            shown = [spans.destination_attribute(uri) or "" for uri in exc.destinations]
            span.set_attribute(names.ATTR_OUTCOME, "parked")
            span.add_event("parked", {names.ATTR_DESTINATION: shown})

        def wake() -> None:
            with unit_of_work(self.engine) as uow:
                self.resend(uow, env.task, env.payload, handoff.saga_id, why="resume")

        self.runner.limits.when_free(exc.destinations, wake, key=handoff.work_id)
        return "parked"

    def _set_aside(self, env: Envelope, handoff: Handoff, exc: Exception) -> str:
        # No retry fixes this: set it aside instead of letting its lease bring it back.
        log.error("message %s set aside as a dead letter: %s", env.message_id, exc)
        self.dead_letter(env, f"{type(exc).__name__}: {exc}", work_id=handoff.work_id)
        return "dead-letter"

    def dead_letter(self, env: Envelope, reason: str, *, work_id: str | None = None) -> str:
        """Record `env` as a dead letter (row, event, metric); its id."""
        return dead_letters.record(
            self.engine,
            reason=reason,
            body=env.payload,
            message_id=env.message_id,
            task=env.task,
            queue=env.queue,
            headers=env.headers,
            saga_id=dead_letters.saga_hint(env.payload),
            work_id=work_id,
        )

    # -- in-process delivery (inline://, the demo) -----------------------------
    def drain(self) -> int:
        """Deliver queued work in this process until none is left."""
        if not self.auto_drain or not isinstance(self.broker, InlineBroker):
            return 0
        handled = 0
        while True:
            if self.relay is not None:
                self.relay.sweep()
                self.relay.run_once()
            got = self.broker.drain(lambda env: self._handle_logged(env))
            handled += got
            if got == 0:
                return handled

    def _handle_logged(self, env: Envelope) -> None:
        try:
            self.handle(env)
        except Exception:
            log.exception("work %s failed; its lease will bring it back", env.message_id)


@contextmanager
def saga_span(name: str, saga: SagaRow | None, attrs: dict[str, Any] | None = None) -> Iterator[None]:
    """A span in the saga's own trace, for work started outside any message
    (a CLI command, the API, the sweeper): one saga is one trace."""
    saga_id = saga.id if saga is not None else None
    with _in_saga_trace(name, saga_id, lambda: saga.trace_context if saga is not None else None, attrs):
        yield


_SAGAS: Table = SagaRow.__table__  # type: ignore[attr-defined]
_TRACE_CONTEXT = select(_SAGAS.c.trace_context).where(_SAGAS.c.id == bindparam("saga_id"))


@contextmanager
def _joined_span(name: str, uow: UnitOfWork, saga_id: str) -> Iterator[None]:
    """`saga_span` for a saga of this unit of work: its trace context as the session holds
    it when the saga is there, else read alone (after a flush, so that a saga added in this
    unit of work is found too)."""

    def carried() -> dict[str, str] | None:
        held = _held_trace_context(uow.session, saga_id)
        if held is not None:
            return held
        uow.session.flush()
        found: dict[str, str] | None = (
            uow.session.connection().execute(_TRACE_CONTEXT, {"saga_id": saga_id}).scalar()
        )
        return found

    with _in_saga_trace(name, saga_id, carried):
        yield


def _held_trace_context(session: Session, saga_id: str) -> dict[str, str] | None:
    """The trace context of `saga_id` from the session's own copy of the saga, with no query:
    one this unit of work loaded (or flushed) and still holds, its column not expired. None
    when the session holds no such copy."""
    saga = session.identity_map.get(identity_key(SagaRow, saga_id))
    if not isinstance(saga, SagaRow) or "trace_context" in inspect(saga).unloaded:
        return None
    return dict(saga.trace_context or {})


@contextmanager
def _in_saga_trace(
    name: str,
    saga_id: str | None,
    trace_context: Callable[[], dict[str, str] | None],
    attrs: dict[str, Any] | None = None,
) -> Iterator[None]:
    """The span, parented on the saga's trace when no trace is current (the saga's trace
    context is asked for only then)."""
    parent = None
    if not trace.get_current_span().get_span_context().is_valid:
        carried = trace_context()
        parent = propagation.extract_context(carried) if carried else None
    attributes = {names.ATTR_SAGA_ID: saga_id} if saga_id is not None else {}
    with spans.open_span(name, {**attributes, **(attrs or {})}, context=parent):
        yield


def _explain(exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:5]]
    return "; ".join(parts)


__all__ = ["App", "saga_span"]
