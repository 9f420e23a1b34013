"""The saga state machine: the table, `apply()`, and random walks over it."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.errors import IllegalTransition, exit_code_for
from sagas.machine import TERMINAL, TRANSITIONS, SagaEvent, SagaState, allowed, apply

DESIGN_STATES = {
    "preparing",
    "ready-for-review",
    "approved",
    "executing",
    "succeeded",
    "failed",
    "effect-unknown",
    "cancelled",
}


def test_the_states_are_spelled_as_in_the_design() -> None:
    assert {s.value for s in SagaState} == DESIGN_STATES


def test_the_happy_path() -> None:
    state = SagaState.PREPARING
    for event in ("review_passed", "approved", "execution_started", "all_acked"):
        state = apply(state, event)
    assert state is SagaState.SUCCEEDED


def test_effect_unknown_leaves_only_by_reconcile_or_cancel() -> None:
    assert allowed(SagaState.EFFECT_UNKNOWN) == {SagaEvent.RECONCILED, SagaEvent.CANCELLED}
    assert apply("effect-unknown", "reconciled") is SagaState.EXECUTING


def test_an_edit_after_approval_goes_back_to_preparing() -> None:
    assert apply("approved", "edited") is SagaState.PREPARING


@pytest.mark.parametrize("state", sorted(TERMINAL))
def test_terminal_states_leave_only_by_an_operators_retry(state: SagaState) -> None:
    """No machine moves a finished saga; `pressroom retry` (an operator) may run a failed one again."""
    retries = {SagaEvent.RETRIED, SagaEvent.PREPARATION_RETRIED} if state is SagaState.FAILED else set()
    assert allowed(state) == retries
    for event in set(SagaEvent) - retries:
        with pytest.raises(IllegalTransition):
            apply(state, event)


def test_an_illegal_move_is_refused_with_exit_4_and_pickles() -> None:
    with pytest.raises(IllegalTransition) as info:
        apply("succeeded", "approved")
    err = info.value
    assert exit_code_for(err) == 4
    assert (err.state, err.event) == ("succeeded", "approved")
    again = pickle.loads(pickle.dumps(err))
    assert isinstance(again, IllegalTransition) and str(again) == str(err) and again.state == "succeeded"


def test_unknown_names_are_refused() -> None:
    with pytest.raises(IllegalTransition):
        apply("published", "approved")


def test_every_state_is_reachable_from_preparing() -> None:
    seen, frontier = {SagaState.PREPARING}, [SagaState.PREPARING]
    while frontier:
        state = frontier.pop()
        for (src, _event), dst in TRANSITIONS.items():
            if src == state and dst not in seen:
                seen.add(dst)
                frontier.append(dst)
    assert seen == set(SagaState)


@given(st.lists(st.sampled_from(list(SagaEvent)), max_size=40))
def test_random_event_sequences_never_reach_an_illegal_state(events: list[SagaEvent]) -> None:
    state = SagaState.PREPARING
    for event in events:
        try:
            nxt = apply(state, event)
        except IllegalTransition:
            assert (state, event) not in TRANSITIONS
            continue
        assert (state, event) in TRANSITIONS and TRANSITIONS[(state, event)] is nxt
        assert state not in TERMINAL or event in (SagaEvent.RETRIED, SagaEvent.PREPARATION_RETRIED)
        if nxt is SagaState.SUCCEEDED:
            assert state is SagaState.EXECUTING, "only an execution can succeed"
        if nxt is SagaState.EXECUTING:
            # A retry goes on with the execution that failed, under the approval it consumed.
            assert state in (SagaState.APPROVED, SagaState.EFFECT_UNKNOWN, SagaState.FAILED), (
                "no execution without approval"
            )
        state = nxt
    assert state in set(SagaState)
