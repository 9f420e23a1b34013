"""Consuming work: each message applied at most once.

`Consumer.handle` checks the inbox, takes the work's lease, runs the task's
handler and commits the inbox row, the work's completion and the handler's
changes in one transaction. Work a handler cannot finish yet is deferred
(its lease brings it back), parked (the `on_parked` wake-up sends it again
when a destination has a free turn) or set aside as a dead letter.
`Consumer.drain` delivers queued work in this process (inline://, the demo).

Work that waits on a model never does so inside a transaction: its lease is
committed before its handler runs and kept alive (`LeaseKeeper`) while the
handler runs, however long its model takes; its final transaction completes
the work only while the lease is still this delivery's. In a worker (`waits`)
such a delivery is handed to `outbox.waits.Waits` and `handle` returns
`waiting` at once: the message is acknowledged, and the delivery holds no
thread while its model answers (should the process die, its lease, no longer
renewed, runs out and the sweeper sends the work again).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

from opentelemetry import trace
from pydantic import ValidationError
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from orchestrator.core.clock import DATABASE_TIME, Clock
from orchestrator.core.errors import InvalidInput, LeaseFirst, NotFound, Parked, Refused, RetryLater
from orchestrator.harness.principals import acting
from orchestrator.store import dead_letters
from orchestrator.store.adapter import adapter_for
from orchestrator.store.db import UnitOfWork, relaxed_commit
from orchestrator.store.harness_store import SqlHarnessStore
from orchestrator.store.work import claim_lease, give_back, renew_lease
from outbox.broker import Broker, InlineBroker
from outbox.dispatch import Dispatcher
from outbox.handlers import Finalizer, Handler, Transact, holding_work_row
from outbox.inbox import already_applied, settle
from outbox.lease_keeper import LeaseKeeper
from outbox.messages import Envelope, Handoff
from outbox.relay import Relay
from outbox.waits import Waits
from telemetry import names, propagation, spans

log = logging.getLogger(__name__)

# `(destinations, wake, key)`: call `wake` once one of `destinations` has a free turn.
OnParked = Callable[[tuple[str, ...], Callable[[], None], str], None]


@dataclass
class Consumer:
    """Applies messages: `handlers` by task, leases `lease_seconds` long."""

    engine: Engine
    transact: Transact
    handlers: dict[str, Handler]
    dispatcher: Dispatcher
    broker: Broker
    store: SqlHarnessStore
    on_parked: OnParked
    lease_seconds: float
    # Leases are taken and work is settled by this clock (the composition root's one clock).
    clock: Clock = DATABASE_TIME
    # PRESSROOM_MODEL: every writer's planner calls a model.
    model: str | None = None
    relay: Relay | None = None
    # inline://: deliver queued work before a use case returns. The demo turns
    # this off and lets its worker threads deliver instead.
    auto_drain: bool = True
    # Queues whose work takes its lease inside its final transaction on
    # PostgreSQL (`folds_lease`): short work that never renews its lease.
    short_queues: frozenset[str] = field(default_factory=lambda: frozenset({"writer", "reviewer"}))
    # A worker's: work that waits on a model runs there, its thread given back while it
    # waits (None: every delivery runs on its caller's thread, as inline:// needs).
    waits: Waits | None = None
    # Renews the leases of work waiting on a model, a third of a lease apart.
    keeper: LeaseKeeper = field(init=False)

    def __post_init__(self) -> None:
        self.keeper = LeaseKeeper(self._renew, interval=self.lease_seconds / 3)

    def _renew(self, work_id: str, holder: str) -> bool:
        return renew_lease(self.engine, work_id, holder, self.lease_seconds)

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
        if self.waits is not None and self.waits_on_model(env.queue, handoff):
            self.waits.start(lambda: self._process_logged(env, handoff))
            return "waiting"
        return self._process(env, handoff)

    def _process_logged(self, env: Envelope, handoff: Handoff) -> None:
        try:
            self._process(env, handoff)
        except Exception:
            log.exception("work %s failed; its lease will bring it back", env.message_id)

    def _process(self, env: Envelope, handoff: Handoff) -> str:
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
        on a connection of its own. Both take the lease first. So does work that
        waits on a model (`waits_on_model`; under `PRESSROOM_MODEL`, all work): a
        model call never runs inside an open transaction nor while the work row's
        lock is held. Should such work come without saying so, its model call
        raises `LeaseFirst` and the work runs again with its lease taken first.
        """
        if self.model or self.waits_on_model(queue, handoff):
            return False
        return queue in self.short_queues and adapter_for(self.engine).fold_lease_in_final_tx

    def waits_on_model(self, queue: str, handoff: Handoff | None) -> bool:
        """Whether the work's planner calls a model (`Handoff.uses_model`, or a writer's under
        `PRESSROOM_MODEL`): its lease is kept alive while its handler runs."""
        return (handoff is not None and handoff.uses_model) or (bool(self.model) and queue == "writer")

    def _handle_with_lease_first(self, env: Envelope, handoff: Handoff, *, keep_alive: bool = False) -> str:
        """The lease in a relaxed transaction of its own, then the handler (its lease kept
        alive when it waits on a model, or `keep_alive`), then the inbox row, the completion
        and the handler's changes in one durable commit."""
        with self.transact() as uow:
            taken = claim_lease(
                uow.session, handoff.work_id, env.message_id, self.lease_seconds, now=self.clock.now()
            )
            if taken is None:
                return self._not_taken(uow, env, handoff)
            relaxed_commit(uow.session)
        handler = self.handlers[env.task]
        kept = keep_alive or self.waits_on_model(env.queue, handoff)
        try:
            with self.keeper.held(handoff.work_id, env.message_id) if kept else nullcontext():
                finalize = handler(handoff, env.message_id)
        except Parked as exc:
            give_back(self.engine, handoff.work_id, env.message_id, self.lease_seconds, now=self.clock.now())
            return self._parked(env, handoff, exc)
        except RetryLater as exc:
            # The lease is kept: the sweeper sends the work again once it runs out.
            return self._deferred(env, handoff, exc)
        except (InvalidInput, NotFound, Refused) as exc:
            return self._set_aside(env, handoff, exc)
        try:
            with self.transact() as uow:
                return self._settled(uow, env, handoff, finalize)
        except IntegrityError:
            # A copy of this message committed its inbox row first: nothing applied twice.
            return "duplicate"

    def _handle_in_one_transaction(self, env: Envelope, handoff: Handoff) -> str:
        """Lease, handler, inbox row with the completion (`settle`) and the handler's
        changes in one transaction on one connection, committed once (durably). A
        handler about to call a model raises `LeaseFirst`: all of it is rolled back,
        and the work runs again with its lease taken first.

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
            with self.transact() as uow:
                taken = claim_lease(
                    uow.session, handoff.work_id, env.message_id, self.lease_seconds, now=self.clock.now()
                )
                if taken is None:
                    return self._not_taken(uow, env, handoff)
                finalize: Finalizer | None = None
                try:
                    with holding_work_row():
                        finalize = self.handlers[env.task](handoff, env.message_id)
                except LeaseFirst:
                    uow.session.rollback()  # the claim and the row's lock go before the model is asked
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
                if finalize is not None:
                    return self._settled(uow, env, handoff, finalize)
        except IntegrityError:
            return "duplicate"
        return self._handle_with_lease_first(env, handoff, keep_alive=True)

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
            now=self.clock.now(),
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
            with self.transact() as uow:
                self.dispatcher.resend(uow, env.task, env.payload, handoff.saga_id, why="resume")

        self.on_parked(tuple(exc.destinations), wake, handoff.work_id)
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


def _explain(exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:5]]
    return "; ".join(parts)


__all__ = ["Consumer", "OnParked"]
