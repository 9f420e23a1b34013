"""The publishing saga runner: carries out what `sagas.decider` says, nothing more.

Each round reads the saga and its steps under a lock, records what the last
round's calls ended in, asks the decider for the next command and either
applies a transition (in that transaction) or, after the commit, runs the
command's tool calls through the harness: the pending steps concurrently,
on the process's one bounded pool of call threads (`call_threads`), never a
thread per destination (at most `limit` calls to one destination at a time in this process; a saga
that finds every destination it waits for at its limit gives its thread back,
see `DestinationLimits`), the undos one after another, the last completed
first. An undo that fails
definitely is retried with bounded backoff; one that still fails, or may
have happened, leaves its step `compensation-failed` for a person.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session

from orchestrator.core.clock import Clock
from orchestrator.core.errors import Parked, RetryLater
from orchestrator.harness.capabilities import ROLE_CAPABILITIES
from orchestrator.harness.handles import Handle, HandleRefused, admit, verify
from orchestrator.harness.ports import HarnessStore
from orchestrator.harness.spec import Refusal, ToolResult, ToolStatus
from orchestrator.store.db import UnitOfWork
from orchestrator.store.events import add_event
from orchestrator.store.tables import SagaRow, StepRow, utcnow
from orchestrator.store.work import queued_before_handles
from orchestrator.toolpath.engine import Caller, sleep_backoff
from orchestrator.toolpath.tool_path import ToolPath
from outbox.handlers import Finalizer, noop
from outbox.messages import Handoff
from sagas import decider, records
from sagas.decider import Compensate, Publish, StartExecution, Transition, Wait
from sagas.destination_limits import DestinationLimits
from sagas.destinations.registry import scheme_of
from sagas.execution_steps import (
    PUBLISHER,
    approval_refusal,
    call_tool,
    publisher_grant,
    rearm,
    start_execution,
    step_views,
)
from sagas.machine import SagaEvent, SagaState
from sagas.step_records import set_step, step_reason
from sagas.step_states import StepState
from telemetry import metrics, names, spans

log = logging.getLogger(__name__)

MAX_ROUNDS = 64
# Which step a transition is about, and what its reason says when this round did not see the call.
STEP_OF: dict[SagaEvent, frozenset[StepState]] = {
    SagaEvent.STEP_UNCERTAIN: decider.UNSETTLED,
    SagaEvent.COMPENSATION_FAILED: decider.UNSETTLED,
    SagaEvent.STEP_FAILED: frozenset({StepState.FAILED}),
}
FALLBACK: dict[StepState, str] = {
    StepState.UNCERTAIN: "outcome unknown",
    StepState.COMPENSATION_FAILED: "the undo's outcome is unknown",
    StepState.FAILED: "error: failed",
}


def publisher_caller(
    saga: SagaRow,
    digest: str,
    actor: str = PUBLISHER,
    *,
    handle: Handle | None = None,
    refusal: str | None = None,
) -> Caller:
    """The publisher's caller: under the handle its handoff carries (a person's cancel or
    reconcile acts without one, with the publisher's table); with `refusal`, every call is
    refused with it (the handoff's handle did not verify)."""
    return Caller(
        actor=actor,
        capabilities=frozenset(handle.actions) if handle is not None else ROLE_CAPABILITIES[PUBLISHER],
        handle=handle,
        handle_refusal=refusal,
        saga_id=saga.id,
        span_attributes={
            names.ATTR_SAGA_ID: saga.id,
            names.ATTR_VERSION: saga.head_version,
            names.ATTR_VERSION_DIGEST: digest,
        },
    )


@dataclass
class Outcome:
    """What one step's call ended in, to record at the start of the next round."""

    state: StepState
    reason: str


@dataclass
class Round:
    """What the calls of this handoff learned, carried from one decision to the next."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    approver_lapsed: str | None = None


@dataclass
class SagaRunner:
    """Runs one saga's publishing; built once by the composition root with what it uses."""

    transact: Callable[[], AbstractContextManager[UnitOfWork]]
    tools: ToolPath
    store: HarnessStore
    signing_key: bytes
    clock: Clock
    renew: Callable[[str, str], object]
    limits: DestinationLimits = field(default_factory=lambda: DestinationLimits(4))
    undo_attempts: int = 3
    pause: Callable[[float], None] = field(default=lambda _s: None)
    # Threads for one process's concurrent publish calls, shared by every saga it runs: a
    # saga with many destinations queues its calls here instead of starting a thread each.
    call_threads: int = 4
    _calls: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)
    _calls_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def call_pool(self) -> ThreadPoolExecutor:
        """The process's bounded pool for publish calls (started on first use)."""
        with self._calls_lock:
            if self._calls is None:
                self._calls = ThreadPoolExecutor(max(1, self.call_threads), thread_name_prefix="publish")
            return self._calls

    # -- the handler -----------------------------------------------------------
    def authority(self, handoff: Handoff) -> tuple[Handle | None, str | None]:
        """The handoff's verified handle (minted for work an earlier release queued), or why
        it is refused: a forged, malformed, missing or expired handle, one for another saga or role, or one
        wider than the publisher's table."""
        if not handoff.handle and (minted := self._for_earlier_work(handoff)) is not None:
            return minted, None
        try:
            handle = verify(handoff.handle, self.signing_key)
        except HandleRefused as exc:
            return None, f"refused handoff: {exc}"
        fault = admit(handle, saga_id=handoff.saga_id, role=PUBLISHER, now=self.clock.now())
        if fault is not None:
            return None, f"refused handoff: {fault.text}"
        extra = set(handle.actions) - ROLE_CAPABILITIES[PUBLISHER]
        if extra:
            return (
                None,
                f"refused handoff: capability handle {handle.id} is wider: {', '.join(sorted(extra))}",
            )
        return handle, None

    def _for_earlier_work(self, handoff: Handoff) -> Handle | None:
        """The handle the dispatcher would have minted, for work a release before handles
        queued (`queued_before_handles`: its work row records none), with a `capability
        minted` event; None for any other handoff without one."""
        with self.transact() as uow:
            if not queued_before_handles(uow.session, handoff.work_id, handoff.model_dump(mode="json")):
                return None
            saga = records.load_saga(uow.session, handoff.saga_id)
            handle = publisher_grant(saga.destinations).mint(
                handle_id=handoff.work_id, saga_id=saga.id, now=self.clock.now()
            )
            add_event(
                uow.session,
                saga_id=saga.id,
                actor=PUBLISHER,
                kind="capability",
                status="minted",
                detail={
                    "work_id": handoff.work_id,
                    "why": "queued by a release before capability handles",
                    "actions": sorted(handle.actions),
                },
            )
        return handle

    def handle(self, handoff: Handoff, holder: str) -> Finalizer:
        """Drive the saga until it finishes, waits for a person, or must be asked again later.

        Every call acts under the handoff's handle; a handle that does not verify refuses
        each call as the policy refuses one (its step fails, the saga compensates)."""
        held, refusal = self.authority(handoff)
        learned = Round()
        for rounds in range(MAX_ROUNDS):
            if rounds:  # the first round starts right after the lease was taken
                self.renew(handoff.work_id, holder)
            with self.transact() as uow:
                saga = records.load_saga(uow.session, handoff.saga_id, lock=True)
                digest = records.head_digest(uow.session, saga)
                if digest is None:
                    return noop
                steps = records.steps(uow.session, saga.id)
                if saga.state == SagaState.EXECUTING and {s.uri for s in steps} != set(saga.destinations):
                    # Every destination has its step row before anything is decided about it.
                    steps = start_execution(uow.session, saga, digest, steps)
                self._record(uow.session, steps, learned)
                command = decider.next_command(self._view(saga, digest, learned), step_views(steps))
                if isinstance(command, StartExecution):
                    # `executing` and the step rows commit with the first decision about them,
                    # before any destination is called.
                    steps = start_execution(uow.session, saga, digest, steps)
                    command = decider.next_command(self._view(saga, digest, learned), step_views(steps))
                if isinstance(command, Wait):
                    return noop
                if isinstance(command, Transition):
                    self._transition(uow, saga, steps, command, learned)
                    return noop
                caller = publisher_caller(saga, digest, handle=held, refusal=refusal)
            if isinstance(command, Publish):
                self._publish(caller, saga.id, command.uris, digest, learned, work_id=handoff.work_id)
            elif isinstance(command, Compensate):
                self._compensate(caller, saga.id, command.uris, digest, learned)
        # Every round settles at least one step; this many without an end is a fault, not progress.
        raise RetryLater(f"saga {handoff.saga_id}: no end after {MAX_ROUNDS} rounds", saga_id=handoff.saga_id)

    # -- reading ---------------------------------------------------------------
    def _view(self, saga: SagaRow, digest: str, learned: Round) -> decider.Saga:
        why = None
        if saga.state == SagaState.APPROVED:
            why = approval_refusal(
                self.store.find_approval(saga.id, digest), saga, digest, self.signing_key, self.clock.now()
            )
        return decider.Saga(
            state=SagaState(saga.state),
            destinations=tuple(saga.destinations),
            approval_refusal=why,
            cancel_requested_by=saga.cancel_requested_by,
            approver_lapsed=learned.approver_lapsed,
        )

    def _record(self, session: Session, steps: list[StepRow], learned: Round) -> None:
        """Write what the last round's calls ended in (a done or compensated step its recorder wrote)."""
        for step in steps:
            outcome = learned.outcomes.get(step.uri)
            if outcome is not None and step.state != outcome.state:
                set_step(session, step, outcome.state, actor=PUBLISHER, reason=outcome.reason)
                if outcome.state is StepState.COMPENSATION_FAILED:
                    metrics.record_compensation_failed(scheme_of(step.uri))

    # -- transitions (each one the decider's) -----------------------------------
    def _transition(
        self, uow: UnitOfWork, saga: SagaRow, steps: list[StepRow], command: Transition, learned: Round
    ) -> None:
        s = uow.session
        event, reason = command.event, command.reason
        detail: dict[str, Any] = {}
        first = _first(steps, STEP_OF.get(event, frozenset()))
        if first is not None:
            known = learned.outcomes.get(first.uri)
            detail = {"destination": first.uri, "key": first.idempotency_key}
            # A later delivery than the one that saw the call reads the cause from the step's event.
            why = known.reason if known else (step_reason(s, first) or FALLBACK[StepState(first.state)])
            reason = f"{first.uri}: {why}"
            if event is SagaEvent.COMPENSATION_FAILED:
                reason = f"{first.uri}: could not be undone: {why}; a person decides (retry or reconcile)"
        if event is SagaEvent.APPROVAL_LAPSED and saga.state == SagaState.EXECUTING:
            # Undone: a later approval publishes them again under the same keys.
            again = [st for st in steps if st.state == StepState.COMPENSATED]
            for step in again:
                rearm(uow, self.store, step, actor=PUBLISHER, reason="compensated after the approver lapsed")
            detail = {"compensated": [st.uri for st in again]}
        if event is SagaEvent.CANCELLED:
            records.void_approvals(s, saga.id, reason="cancelled")
        records.transition(s, saga, event, actor=PUBLISHER, reason=reason, detail=detail or None)
        if event is SagaEvent.STEP_UNCERTAIN and first is not None:
            metrics.record_effect_unknown(scheme_of(first.uri))
        if SagaState(saga.state) in (SagaState.SUCCEEDED, SagaState.FAILED, SagaState.CANCELLED):
            metrics.record_saga_finished(saga.state, (utcnow() - saga.created_at).total_seconds())

    # -- tool calls --------------------------------------------------------------
    def _publish(
        self,
        caller: Caller,
        saga_id: str,
        uris: tuple[str, ...],
        digest: str,
        learned: Round,
        *,
        work_id: str = "",
    ) -> None:
        """Call each destination with a free turn in this process (or one held for this
        work), concurrently. One at its limit waits for a later round; when none has a
        turn the delivery ends `Parked`."""
        ready = [uri for uri in uris if self.limits.take(uri, work_id)]
        if not ready:
            for uri in uris:
                metrics.record_destination_wait(scheme_of(uri))
            raise Parked(
                f"{', '.join(spans.destination_attribute(u) or u for u in uris)}: "
                f"{self.limits.limit} in flight from this worker, its limit "
                "(PRESSROOM_DESTINATION_CONCURRENCY); sent again when one ends",
                saga_id=saga_id,
                destinations=uris,
            )

        def one(uri: str) -> tuple[str, ToolResult]:
            try:
                return uri, call_tool(self.tools, caller, "publish", saga_id, uri, digest)
            finally:
                self.limits.give_back(uri)

        if len(ready) == 1:
            results = [one(ready[0])]
        else:
            pool = self.call_pool()  # bounded: never a thread per destination
            # Each call keeps the trace and the acting person of this round.
            futures = [pool.submit(contextvars.copy_context().run, one, uri) for uri in ready]
            results = [f.result() for f in futures]
        held: list[str] = []
        for uri, result in results:
            if result.applied:
                continue
            if result.status is ToolStatus.UNCERTAIN:
                learned.outcomes[uri] = Outcome(StepState.UNCERTAIN, _without_uri(uri, result.reason))
            elif result.refusal is Refusal.APPROVER_LAPSED:
                learned.approver_lapsed = f"{uri}: not published: {result.reason}"
            elif result.refusal is Refusal.IN_FLIGHT:
                held.append(f"{uri}: {result.reason}")
            else:
                learned.outcomes[uri] = Outcome(
                    StepState.FAILED, f"{result.status.value}: {_without_uri(uri, result.reason)}"
                )
        if held and not learned.outcomes and learned.approver_lapsed is None:
            # Another call holds a step's key: neither a failure nor a success yet.
            raise RetryLater("; ".join(held), saga_id=saga_id)

    def _compensate(
        self, caller: Caller, saga_id: str, uris: tuple[str, ...], digest: str, learned: Round
    ) -> None:
        """Undo in the order given; stop at the first undo that needs a person."""
        for uri in uris:
            result = self.undo(caller, saga_id, uri, digest)
            if result.applied:
                continue
            if result.refusal is Refusal.IN_FLIGHT:
                raise RetryLater(f"{uri}: {result.reason}", saga_id=saga_id)
            learned.outcomes[uri] = Outcome(StepState.COMPENSATION_FAILED, _without_uri(uri, result.reason))
            return

    def undo(self, caller: Caller, saga_id: str, uri: str, digest: str) -> ToolResult:
        """One step's undo, retried with bounded backoff while it fails definitely."""
        result = call_tool(self.tools, caller, "publish.compensate", saga_id, uri, digest)
        attempt = 1
        while not result.applied and result.status is ToolStatus.ERROR and attempt < self.undo_attempts:
            self.pause(sleep_backoff(attempt))
            attempt += 1
            result = call_tool(self.tools, caller, "publish.compensate", saga_id, uri, digest)
        return result


def _first(steps: list[StepRow], states: frozenset[StepState]) -> StepRow | None:
    found = [s for s in steps if StepState(s.state) in states]
    return min(found, key=lambda s: s.position) if found else None


def _without_uri(uri: str, reason: str | None) -> str:
    """The adapter's message without the destination it already starts with (the reason names it once)."""
    text = reason or ""
    return text[len(uri) + 2 :] if text.startswith(f"{uri}: ") else text


__all__ = ["PUBLISHER", "SagaRunner", "publisher_caller"]
