"""What a publishing saga does next: `next_command(saga, steps) -> Command`. Pure.

The runner, reconcile, cancel, retry and the lease give-up only carry out the
commands this module returns; none of them decides a transition on its own.
The rules, in order:

* `approved`: an approval that no longer authorizes the head version hands
  the saga back to the reviewers; otherwise execution starts.
* `executing`, something is still uncertain (a publish or an undo that may
  have happened): wait for a person, never guess and never retry it.
* `executing` and halted (a step failed definitely, a cancel was asked for,
  or the approver lapsed at a step's intent): undo every completed step, the
  last completed first; an undo that failed after its retries waits for a
  person; when nothing is left to undo, finish (`failed`, `cancelled`, or
  back to `ready-for-review`).
* `executing` otherwise: publish every pending reversible step (the runner
  runs them concurrently); once every reversible step is done, the pending
  irreversible ones (an `email:` cannot be unsent); when all are done,
  `succeeded`.

Nothing is published after a definite failure, an uncertain step is never
published again automatically, and no irreversible step starts while a
reversible one is not done.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sagas.machine import SagaEvent, SagaState
from sagas.step_states import StepState


class Halt(StrEnum):
    """Why an execution stops before all its steps are done."""

    FAILED = "failed"  # a step failed definitely
    CANCELLED = "cancelled"  # an operator asked for a cancel
    APPROVER_LAPSED = "approver-lapsed"  # at a step's intent the approver was no longer a reviewer


@dataclass(frozen=True)
class Step:
    """What the decider reads of one step."""

    uri: str
    position: int
    state: StepState
    # When the step reached its current state: for `done` steps, the moment it completed.
    since: datetime | None = None
    # Whether compensation undoes its publish; an irreversible step runs after every reversible one.
    reversible: bool = True


@dataclass(frozen=True)
class Saga:
    """What the decider reads of the saga."""

    state: SagaState
    destinations: tuple[str, ...]
    # Why the approval cannot start an execution (only asked in `approved`), or None.
    approval_refusal: str | None = None
    cancel_requested_by: str | None = None
    # Set by the runner when a step's intent found the approver lapsed.
    approver_lapsed: str | None = None


# -- commands -------------------------------------------------------------------------


@dataclass(frozen=True)
class Wait:
    """Nothing for a machine to do: the saga is finished, or waits for a person."""

    why: str


@dataclass(frozen=True)
class StartExecution:
    """`approved → executing`: create the steps for the head version."""


@dataclass(frozen=True)
class Transition:
    """Apply `event` to the saga with `reason` (the command ends this decision round)."""

    event: SagaEvent
    reason: str | None = None


@dataclass(frozen=True)
class Publish:
    """Publish these steps now; they may run concurrently."""

    uris: tuple[str, ...]


@dataclass(frozen=True)
class Compensate:
    """Undo these completed steps one after another, in this order."""

    uris: tuple[str, ...]


Command = Wait | StartExecution | Transition | Publish | Compensate

# Step states that mean "maybe applied, a person decides".
UNSETTLED = frozenset({StepState.UNCERTAIN, StepState.COMPENSATION_FAILED})


def halt_of(saga: Saga, steps: tuple[Step, ...]) -> Halt | None:
    """Why the execution stops, if it does: a definite failure first, then a cancel, then a lapse."""
    if any(s.state is StepState.FAILED for s in steps):
        return Halt.FAILED
    if saga.cancel_requested_by:
        return Halt.CANCELLED
    if saga.approver_lapsed:
        return Halt.APPROVER_LAPSED
    return None


def undo_order(steps: tuple[Step, ...], also: frozenset[StepState] = frozenset()) -> tuple[str, ...]:
    """The completed steps (and those in `also`), the last completed first (ties: the later position first)."""
    done = [s for s in steps if s.state is StepState.DONE or s.state in also]
    done.sort(key=lambda s: (s.since is not None, s.since or datetime.min, s.position), reverse=True)
    return tuple(s.uri for s in done)


def next_command(saga: Saga, steps: tuple[Step, ...]) -> Command:
    """The one thing to do next for `saga` with `steps` (no I/O, no clock)."""
    if saga.state is SagaState.APPROVED:
        if saga.approval_refusal:
            return Transition(
                SagaEvent.APPROVAL_LAPSED, f"approval lapsed before publishing: {saga.approval_refusal}"
            )
        return StartExecution()
    if saga.state is not SagaState.EXECUTING:
        return Wait(f"the saga is {saga.state.value}")
    unsettled = [s for s in steps if s.state in UNSETTLED]
    if unsettled:
        first = min(unsettled, key=lambda s: s.position)
        if first.state is StepState.COMPENSATION_FAILED:
            return Transition(SagaEvent.COMPENSATION_FAILED)
        return Transition(SagaEvent.STEP_UNCERTAIN, None)
    halt = halt_of(saga, steps)
    if halt is not None:
        undo = undo_order(steps)
        if undo:
            return Compensate(undo)
        if halt is Halt.FAILED:
            return Transition(SagaEvent.STEP_FAILED, None)
        if halt is Halt.CANCELLED:
            return Transition(SagaEvent.CANCELLED, f"cancelled by {saga.cancel_requested_by}")
        return Transition(SagaEvent.APPROVAL_LAPSED, saga.approver_lapsed)
    by_uri = {s.uri: s for s in steps}
    pending = tuple(
        uri for uri in saga.destinations if uri not in by_uri or by_uri[uri].state is StepState.PENDING
    )
    if pending and (now := _reversible_first(pending, by_uri)):
        return Publish(now)
    if not pending and all(by_uri[uri].state is StepState.DONE for uri in saga.destinations):
        return Transition(SagaEvent.ALL_ACKED, None)
    # Every step is settled but not all done and no halt: compensated steps of an execution
    # that was not halted (an older run's leftovers) are published again, reversible ones first.
    again = tuple(uri for uri in saga.destinations if by_uri[uri].state is StepState.COMPENSATED)
    if again and (now := _reversible_first(again, by_uri)):
        return Publish(now)
    return Wait("no step can move")


def _reversible_first(ready: tuple[str, ...], by_uri: dict[str, Step]) -> tuple[str, ...]:
    """Of the steps `ready` to publish, the reversible ones; when there are none, the
    irreversible ones if every reversible step is done, else none. A destination without
    a step row yet counts as reversible (the runner creates every row before it asks)."""
    first = tuple(uri for uri in ready if uri not in by_uri or by_uri[uri].reversible)
    if first:
        return first
    if all(s.state is StepState.DONE for s in by_uri.values() if s.reversible):
        return ready
    return ()


def on_lease_exhausted(state: SagaState) -> tuple[SagaEvent, ...]:
    """Work that kept losing its lease: what to apply, honestly. A publish may have
    started, so an execution goes to `effect-unknown` (its unfinished steps with a key
    become uncertain); a preparation fails."""
    if state is SagaState.PREPARING:
        return (SagaEvent.PREPARATION_FAILED,)
    if state is SagaState.APPROVED:
        return (SagaEvent.EXECUTION_STARTED, SagaEvent.STEP_UNCERTAIN)
    if state is SagaState.EXECUTING:
        return (SagaEvent.STEP_UNCERTAIN,)
    return ()


__all__ = [
    "Command",
    "Compensate",
    "Halt",
    "Publish",
    "Saga",
    "StartExecution",
    "Step",
    "Transition",
    "Wait",
    "halt_of",
    "next_command",
    "on_lease_exhausted",
    "undo_order",
]
