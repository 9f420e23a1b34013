"""A saga's state derived from its events alone: `reduce(events) -> SagaView`.

Pure: no database, broker or clock. The events a saga's state depends on:

* `saga` / `submitted` — the saga exists, `preparing` (its first event);
* `transition` — `detail.event` applied with `sagas.machine.apply`; the
  event's own `from`/`to` must agree with what the machine says;
* `version` / `created` — a new head version, numbered one past the last;
* `step` — a publishing step moved to `status` (`detail.destination`,
  `detail.key`);
* `saga` / `pruned` — retention removed the events before it (`pressroom
  prune`); its detail is what they gave (state, head version, steps), and
  the log goes on from there.

Every other kind (tool calls, intents, messages, reconcile notes) is history
and leaves the state alone. Events of every schema version the project has
written (`event_chain.KNOWN_SCHEMAS`: 1 before migration 0013, 2 since) hold
these kinds, statuses and details alike and are read alike. An event the
machine would refuse, one out of place, or one of a schema version this
release does not know raises `EventLogMismatch` naming its `seq`: the log
does not explain the state, which is the point of checking.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from orchestrator.core.errors import IllegalTransition, Refused
from orchestrator.harness.event_chain import KNOWN_SCHEMAS, LEGACY_SCHEMA
from sagas.machine import SagaEvent, SagaState, apply
from sagas.step_states import StepState

PRUNED = "pruned"  # the status of a prune snapshot event (kind `saga`)


class EventLogMismatch(Refused):
    """The events cannot produce a state: one is illegal or out of place."""


class LoggedEvent(BaseModel):
    """What the reducer reads of one stored event."""

    model_config = ConfigDict(frozen=True)

    seq: int | None = None
    kind: str
    status: str
    detail: dict[str, Any] = {}
    schema_version: int = LEGACY_SCHEMA


class StepView(BaseModel):
    model_config = ConfigDict(frozen=True)

    state: StepState
    key: str | None = None


class SagaView(BaseModel):
    """The part of a saga's stored state its events must explain."""

    model_config = ConfigDict(frozen=True)

    state: SagaState
    head_version: int = 0
    steps: dict[str, StepView] = {}


def _fail(event: LoggedEvent, why: str) -> EventLogMismatch:
    return EventLogMismatch(f"event {event.seq} ({event.kind} {event.status}): {why}", seq=event.seq)


def _readable(events: Iterable[LoggedEvent]) -> Iterator[LoggedEvent]:
    """`events`, each of a schema version this release reads."""
    for event in events:
        if event.schema_version not in KNOWN_SCHEMAS:
            raise _fail(event, f"schema version {event.schema_version} is not one this release reads")
        yield event


def reduce(events: Iterable[LoggedEvent]) -> SagaView:
    """The saga's state after `events`, in order; `EventLogMismatch` when they cannot produce one."""
    state: SagaState | None = None
    head = 0
    steps: dict[str, StepView] = {}
    for event in _readable(events):
        if event.kind == "saga" and event.status == PRUNED:
            # Retention removed the history before this event; it states what that history gave.
            if state is not None:
                raise _fail(event, "a prune snapshot must open the log")
            state, head, steps = _snapshot(event)
            continue
        if event.kind == "saga" and event.status == "submitted":
            if state is not None:
                raise _fail(event, "the saga was already submitted")
            state = SagaState.PREPARING
            continue
        if state is None:
            raise _fail(event, "comes before the saga's submitted event")
        if event.kind == "transition":
            state = _transition(event, state)
        elif event.kind == "version" and event.status == "created":
            number = event.detail.get("version")
            if number != head + 1:
                raise _fail(event, f"version {number!r} does not follow version {head}")
            head = number
        elif event.kind == "step":
            uri = event.detail.get("destination")
            if not isinstance(uri, str):
                raise _fail(event, "names no destination")
            try:
                steps[uri] = StepView(state=StepState(event.status), key=event.detail.get("key"))
            except ValueError:
                raise _fail(event, f"{event.status!r} is not a step state") from None
    if state is None:
        raise EventLogMismatch("no submitted event: the saga has no history", seq=None)
    return SagaView(state=state, head_version=head, steps=steps)


def _snapshot(event: LoggedEvent) -> tuple[SagaState, int, dict[str, StepView]]:
    """The saga as a prune snapshot (`snapshot_detail`) records it."""
    try:
        state = SagaState(str(event.detail.get("state")))
        head = int(event.detail.get("head_version", 0))
        steps = {
            str(uri): StepView(state=StepState(view["state"]), key=view.get("key"))
            for uri, view in dict(event.detail.get("steps", {})).items()
        }
    except (TypeError, ValueError, KeyError):
        raise _fail(event, "the prune snapshot does not name a state, a head version and steps") from None
    return state, head, steps


def snapshot_detail(view: SagaView) -> dict[str, Any]:
    """The detail of a prune snapshot event for a saga whose history is removed."""
    return {
        "state": view.state.value,
        "head_version": view.head_version,
        "steps": {uri: {"state": step.state.value, "key": step.key} for uri, step in view.steps.items()},
    }


def _transition(event: LoggedEvent, state: SagaState) -> SagaState:
    try:
        after = apply(state, SagaEvent(str(event.detail.get("event"))))
    except ValueError:
        raise _fail(event, f"{event.detail.get('event')!r} is not a saga event") from None
    except IllegalTransition as exc:
        raise _fail(event, str(exc)) from None
    if event.detail.get("from") != state.value or event.detail.get("to") != after.value:
        raise _fail(
            event,
            f"says {event.detail.get('from')} → {event.detail.get('to')}, the machine says "
            f"{state.value} → {after.value}",
        )
    return after


def differences(stored: SagaView, derived: SagaView) -> list[str]:
    """Where the stored state and the one derived from the events disagree, first to last."""
    out: list[str] = []
    if stored.state != derived.state:
        out.append(f"state: stored {stored.state.value}, events give {derived.state.value}")
    if stored.head_version != derived.head_version:
        out.append(f"head version: stored {stored.head_version}, events give {derived.head_version}")
    for uri in sorted(set(stored.steps) | set(derived.steps)):
        a, b = stored.steps.get(uri), derived.steps.get(uri)
        if a != b:
            out.append(f"step {uri}: stored {_step(a)}, events give {_step(b)}")
    return out


def _step(view: StepView | None) -> str:
    return "nothing" if view is None else f"{view.state.value} (key {view.key})"


def stored_view(state: str, head_version: int, steps: Mapping[str, tuple[str, str | None]]) -> SagaView:
    """A `SagaView` of stored rows: the saga's state and head, each step's (state, key).

    A value that is no state raises pydantic's `ValidationError`."""
    return SagaView.model_validate(
        {
            "state": state,
            "head_version": head_version,
            "steps": {uri: {"state": s, "key": key} for uri, (s, key) in steps.items()},
        }
    )


__all__ = [
    "PRUNED",
    "EventLogMismatch",
    "LoggedEvent",
    "SagaView",
    "StepView",
    "differences",
    "reduce",
    "snapshot_detail",
    "stored_view",
]
