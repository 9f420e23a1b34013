"""The saga reducer: state from events alone, and random legal histories from the machine."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagas.machine import SagaEvent, SagaState, allowed, apply
from sagas.reducer import (
    PRUNED,
    EventLogMismatch,
    LoggedEvent,
    SagaView,
    StepView,
    differences,
    reduce,
    snapshot_detail,
    stored_view,
)
from sagas.step_states import StepState

URIS = ["site:/srv/a", "git:/srv/b", "webhook:http://127.0.0.1:9/x"]


def submitted() -> LoggedEvent:
    return LoggedEvent(seq=1, kind="saga", status="submitted", detail={"destinations": URIS})


def moved(state: SagaState, event: SagaEvent, seq: int = 0) -> LoggedEvent:
    after = apply(state, event)
    return LoggedEvent(
        seq=seq,
        kind="transition",
        status=after.value,
        detail={"from": state.value, "to": after.value, "event": event.value},
    )


def version(number: int, seq: int = 0) -> LoggedEvent:
    return LoggedEvent(seq=seq, kind="version", status="created", detail={"version": number})


def step(uri: str, state: StepState, key: str | None = "k", seq: int = 0) -> LoggedEvent:
    return LoggedEvent(seq=seq, kind="step", status=state.value, detail={"destination": uri, "key": key})


def test_a_published_saga() -> None:
    s = SagaState.PREPARING
    log = [submitted(), version(1)]
    for event in (SagaEvent.REVIEW_PASSED, SagaEvent.APPROVED, SagaEvent.EXECUTION_STARTED):
        log.append(moved(s, event))
        s = apply(s, event)
    log += [step(URIS[0], StepState.PENDING, "k0"), step(URIS[0], StepState.DONE, "k0")]
    log += [moved(s, SagaEvent.ALL_ACKED)]
    # Events that are history only (tool calls, messages) change nothing.
    log.insert(3, LoggedEvent(kind="tool_call", status="ok", detail={"x": 1}))
    assert reduce(log) == SagaView(
        state=SagaState.SUCCEEDED, head_version=1, steps={URIS[0]: StepView(state=StepState.DONE, key="k0")}
    )


def test_no_events_is_no_saga() -> None:
    with pytest.raises(EventLogMismatch, match="no submitted event"):
        reduce([])


def test_an_event_before_the_submission_is_out_of_place() -> None:
    with pytest.raises(EventLogMismatch, match="event 7 .*before the saga's submitted event"):
        reduce([LoggedEvent(seq=7, kind="intent", status="pending"), submitted()])


def test_a_second_submission_is_refused() -> None:
    with pytest.raises(EventLogMismatch, match="already submitted"):
        reduce([submitted(), submitted()])


def test_an_illegal_transition_names_its_event() -> None:
    bad = moved(SagaState.EXECUTING, SagaEvent.ALL_ACKED, seq=5)  # the saga is still preparing
    with pytest.raises(
        EventLogMismatch, match=r"event 5 \(transition succeeded\).*cannot finish a saga that is preparing"
    ):
        reduce([submitted(), bad])


def test_a_transition_whose_recorded_target_disagrees_with_the_machine() -> None:
    forged = LoggedEvent(
        seq=3,
        kind="transition",
        status="succeeded",
        detail={"from": "preparing", "to": "succeeded", "event": "review_passed"},
    )
    with pytest.raises(EventLogMismatch, match="machine says preparing → ready-for-review"):
        reduce([submitted(), forged])


def test_an_unknown_saga_event_or_step_state() -> None:
    unknown = LoggedEvent(
        seq=2, kind="transition", status="x", detail={"from": "preparing", "to": "x", "event": "jump"}
    )
    with pytest.raises(EventLogMismatch, match="'jump' is not a saga event"):
        reduce([submitted(), unknown])
    with pytest.raises(EventLogMismatch, match="'gone' is not a step state"):
        reduce(
            [submitted(), LoggedEvent(seq=2, kind="step", status="gone", detail={"destination": "site:/a"})]
        )
    with pytest.raises(EventLogMismatch, match="names no destination"):
        reduce([submitted(), LoggedEvent(seq=2, kind="step", status="done", detail={})])


def test_versions_follow_one_another() -> None:
    assert reduce([submitted(), version(1), version(2)]).head_version == 2
    with pytest.raises(EventLogMismatch, match="version 3 does not follow version 1"):
        reduce([submitted(), version(1), version(3)])


def test_differences_name_each_disagreement() -> None:
    derived = SagaView(
        state=SagaState.EXECUTING, head_version=1, steps={"site:/a": StepView(state=StepState.DONE, key="k")}
    )
    stored = stored_view("succeeded", 2, {"site:/a": ("pending", "k"), "git:/b": ("done", "j")})
    assert differences(stored, derived) == [
        "state: stored succeeded, events give executing",
        "head version: stored 2, events give 1",
        "step git:/b: stored done (key j), events give nothing",
        "step site:/a: stored pending (key k), events give done (key k)",
    ]
    assert differences(derived, derived) == []


def test_a_stored_value_that_is_no_state_is_refused() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        stored_view("bogus", 1, {})


# -- random legal histories ---------------------------------------------------------------
@st.composite
def histories(draw: st.DrawFn) -> tuple[list[LoggedEvent], SagaState, int, dict[str, StepView]]:
    """A legal walk through the machine, with versions, step moves and noise in between."""
    state = SagaState.PREPARING
    log: list[LoggedEvent] = [submitted()]
    head = 0
    steps: dict[str, StepView] = {}
    for _ in range(draw(st.integers(0, 25))):
        what = draw(st.sampled_from(["transition", "transition", "version", "step", "noise"]))
        if what == "transition":
            choices = sorted(allowed(state))
            if not choices:
                break  # a terminal state
            event = draw(st.sampled_from(choices))
            log.append(moved(state, event))
            state = apply(state, event)
        elif what == "version":
            head += 1
            log.append(version(head))
        elif what == "step":
            uri = draw(st.sampled_from(URIS))
            view = StepView(
                state=draw(st.sampled_from(list(StepState))), key=draw(st.sampled_from(["k1", "k2", None]))
            )
            steps[uri] = view
            log.append(step(uri, view.state, view.key))
        else:
            kind: Any = draw(st.sampled_from(["tool_call", "intent", "message", "reconcile"]))
            log.append(LoggedEvent(kind=kind, status="ok", detail={"n": draw(st.integers())}))
    for i, event in enumerate(log, start=1):
        log[i - 1] = event.model_copy(update={"seq": i})
    return log, state, head, steps


@given(histories())
def test_the_reducer_follows_every_legal_history(
    history: tuple[list[LoggedEvent], SagaState, int, dict[str, StepView]],
) -> None:
    log, state, head, steps = history
    assert reduce(log) == SagaView(state=state, head_version=head, steps=steps)


@given(histories(), st.data())
def test_an_illegal_event_anywhere_is_caught(
    history: tuple[list[LoggedEvent], SagaState, int, dict[str, StepView]], data: st.DataObject
) -> None:
    log = history[0]
    at = data.draw(st.integers(1, len(log)))
    before = reduce(log[:at]).state
    illegal = sorted(set(SagaEvent) - allowed(before))
    event = data.draw(st.sampled_from(illegal))
    forged = LoggedEvent(
        seq=999, kind="transition", status="x", detail={"from": before.value, "to": "x", "event": event.value}
    )
    with pytest.raises(EventLogMismatch, match="event 999"):
        reduce([*log[:at], forged, *log[at:]])


def test_a_prune_snapshot_opens_the_log_and_states_what_was_removed() -> None:
    stored = stored_view("succeeded", 2, {URIS[0]: ("done", "k1")})
    snap = LoggedEvent(seq=40, kind="saga", status=PRUNED, detail=snapshot_detail(stored))
    assert reduce([snap]) == stored
    # A later change goes on from the snapshot (a person reconciling a pruned saga, say).
    later = reduce([snap, step(URIS[0], StepState.UNCERTAIN, key="k1", seq=41)])
    assert later.steps[URIS[0]].state is StepState.UNCERTAIN and later.state is SagaState.SUCCEEDED


def test_a_prune_snapshot_anywhere_but_first_or_without_a_state_is_a_mismatch() -> None:
    snap = LoggedEvent(
        seq=9, kind="saga", status=PRUNED, detail=snapshot_detail(stored_view("failed", 1, {}))
    )
    with pytest.raises(EventLogMismatch, match=r"event 9 .*must open the log"):
        reduce([submitted(), snap])
    with pytest.raises(EventLogMismatch, match="does not name a state"):
        reduce([LoggedEvent(seq=3, kind="saga", status=PRUNED, detail={"state": "gone"})])
